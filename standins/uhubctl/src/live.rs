//! The stand-in's real world: its state file from `UHUBCTL_STATE`, sleeps scaled by
//! `UHUBCTL_TIME_SCALE`, and the devices' hooks run as the hubs switch.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::hooks::Watch;
use crate::session::World;
use crate::state::State;
use crate::store::Store;

/// uhubctl's sleeps (2 s for a cycle by default) shrink by this unless UHUBCTL_TIME_SCALE says.
const DEFAULT_SCALE: f64 = 0.01;

pub struct Live {
    store: Store,
    watch: Watch,
    scale: f64,
}

impl Live {
    /// The state named by `UHUBCTL_STATE`, locked until this is dropped.
    pub fn open() -> Result<(Live, State), String> {
        let path = std::env::var_os("UHUBCTL_STATE").map(PathBuf::from).ok_or(
            "uhubctl stand-in: UHUBCTL_STATE is not set; point it at the JSON file that describes the hubs \
             (standins/uhubctl/src/main.rs)",
        )?;
        let scale = match std::env::var("UHUBCTL_TIME_SCALE") {
            Ok(s) => s
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or(format!("uhubctl stand-in: UHUBCTL_TIME_SCALE={s:?} is not a number ≥ 0"))?,
            Err(_) => DEFAULT_SCALE,
        };
        let (store, state) = Store::open(&path).map_err(|e| format!("uhubctl stand-in: {e}"))?;
        Ok((Live { store, watch: Watch::new(&state), scale }, state))
    }
}

impl World for Live {
    fn sleep_ms(&mut self, ms: u64) {
        std::thread::sleep(Duration::from_secs_f64(ms as f64 / 1000.0 * self.scale));
    }

    fn commit(&mut self, state: &State) -> io::Result<()> {
        self.store.save(state)?;
        self.watch.update(state, &mut io::stderr());
        Ok(())
    }
}
