//! The operator at the terminal: manual tether steps are asked and confirmed here.

use std::io::IsTerminal;

use async_trait::async_trait;

use crate::tether::{Operator, TetherError};

pub struct TerminalOperator {
    interactive: bool,
}

impl TerminalOperator {
    pub fn new() -> Self {
        TerminalOperator { interactive: std::io::stdin().is_terminal() }
    }
}

impl Default for TerminalOperator {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Operator for TerminalOperator {
    async fn confirm(&self, device: &str, instruction: &str) -> Result<(), TetherError> {
        if !self.interactive {
            return Err(TetherError::NoOperator {
                device: device.into(),
                instruction: instruction.into(),
                detail:
                    "standard input is not a terminal; use tether = \"uhubctl\" or \"software\" for unattended runs"
                        .into(),
            });
        }
        let (device, instruction) = (device.to_string(), instruction.to_string());
        tokio::task::spawn_blocking(move || {
            eprint!("\n>>> {device}: {instruction}, then press Enter ");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| ()).map_err(|e| TetherError::NoOperator {
                device: device.clone(),
                instruction: instruction.clone(),
                detail: e.to_string(),
            })
        })
        .await
        .map_err(|e| TetherError::NoOperator {
            device: String::new(),
            instruction: String::new(),
            detail: e.to_string(),
        })?
    }
}
