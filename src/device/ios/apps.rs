//! Launching and stopping the app under test: DVT process control (Instruments' remote
//! server, iOS ≤ 16, needs the developer image) or CoreDevice's app service over RSD
//! through the lockdown tunnel (iOS 17+).

use idevice::IdeviceService;
use plist::{Dictionary, Value};

use super::error::IosError;
use super::phone::{CALL, Phone, major};
use super::tunnel::{OPENING_TUNNEL, TunnelError, rsd_service};

/// How a launched app is reached again to stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Dvt,
    AppService,
}

impl Launcher {
    pub fn for_version(version: &str) -> Launcher {
        if major(version) >= 17 { Launcher::AppService } else { Launcher::Dvt }
    }
}

/// What to start: the bundle, its environment and its arguments in order.
#[derive(Debug, Clone)]
pub struct Launch {
    pub bundle_id: String,
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl Phone {
    /// Starts `l` (killing a running copy first); its pid.
    pub async fn launch(&self, how: Launcher, l: &Launch) -> Result<u64, IosError> {
        self.bounded("launching the app", CALL, async {
            match how {
                Launcher::Dvt => self.launch_dvt(l).await,
                Launcher::AppService => self.on_tunnel(TunnelCall::Launch(l.clone())).await,
            }
        })
        .await
    }

    /// Stops process `pid` (SIGTERM over the app service; `killPid:` over DVT).
    pub async fn kill(&self, how: Launcher, pid: u64) -> Result<(), IosError> {
        self.bounded("stopping the app", CALL, async {
            match how {
                Launcher::Dvt => {
                    let p = self.provider().await?;
                    let what = "stopping the app over DVT";
                    let mut rs = idevice::dvt::remote_server::RemoteServerClient::connect(&p)
                        .await
                        .map_err(|e| IosError::from_idevice(&self.at, what, e))?;
                    let mut pc = idevice::dvt::process_control::ProcessControlClient::new(&mut rs)
                        .await
                        .map_err(|e| IosError::from_idevice(&self.at, what, e))?;
                    pc.kill_app(pid).await.map_err(|e| IosError::from_idevice(&self.at, what, e))
                }
                Launcher::AppService => self.on_tunnel(TunnelCall::Signal(pid, 15)).await.map(|_| ()),
            }
        })
        .await
    }

    /// Whether process `pid` still runs (DVT's device info `isRunningPid:`; the app
    /// service's process list on iOS 17+).
    pub async fn is_running(&self, how: Launcher, pid: u64) -> Result<bool, IosError> {
        self.bounded("asking whether the app runs", CALL, async {
            match how {
                Launcher::Dvt => {
                    let p = self.provider().await?;
                    let what = "asking DVT whether the app runs";
                    let err = |e| IosError::from_idevice(&self.at, what, e);
                    let mut rs = idevice::dvt::remote_server::RemoteServerClient::connect(&p).await.map_err(err)?;
                    let mut info = idevice::dvt::device_info::DeviceInfoClient::new(&mut rs).await.map_err(err)?;
                    info.is_running_pid(u32::try_from(pid).unwrap_or(u32::MAX)).await.map_err(err)
                }
                Launcher::AppService => self.on_tunnel(TunnelCall::Running(pid)).await.map(|n| n > 0),
            }
        })
        .await
    }

    async fn launch_dvt(&self, l: &Launch) -> Result<u64, IosError> {
        let p = self.provider().await?;
        let what = "launching the app over DVT (Instruments' remote server)";
        let err = |e| IosError::from_idevice(&self.at, what, e);
        let mut rs = idevice::dvt::remote_server::RemoteServerClient::connect(&p).await.map_err(err)?;
        let mut pc = idevice::dvt::process_control::ProcessControlClient::new(&mut rs).await.map_err(err)?;
        let env: Dictionary = l.env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        // The crate sends the dictionary's values, in insertion order, as the argument list.
        let args: Dictionary =
            l.args.iter().enumerate().map(|(i, a)| (i.to_string(), Value::String(a.clone()))).collect();
        pc.launch_app(&l.bundle_id, Some(env), Some(args), false, true).await.map_err(err)
    }

    /// Runs `call` through the CoreDevice tunnel. The crate's RSD and XPC futures are not
    /// `Send`, so the whole conversation runs on a blocking thread of its own, driven by
    /// this runtime's handle (the tunnel's own tasks still run on the runtime).
    async fn on_tunnel(&self, call: TunnelCall) -> Result<u64, IosError> {
        let p = self.provider().await?;
        let at = self.at.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || handle.block_on(tunnel_call(p, call)))
            .await
            .map_err(|e| self.failed("the CoreDevice tunnel", e.to_string()))?
            .map_err(|(what, e)| match e {
                e @ (idevice::IdeviceError::Socket(_) | idevice::IdeviceError::DeviceNotFound) => {
                    IosError::from_idevice(&at, what, e)
                }
                e if what == OPENING_TUNNEL => {
                    IosError::NoTunnel { at: at.clone(), version: "17+".into(), detail: e.to_string() }
                }
                e => IosError::from_idevice(&at, what, e),
            })
    }
}

#[derive(Debug, Clone)]
enum TunnelCall {
    Launch(Launch),
    Signal(u64, u32),
    /// 1 when the pid is among the app service's processes, else 0.
    Running(u64),
}

async fn tunnel_call(p: super::mux::Provider, call: TunnelCall) -> Result<u64, TunnelError> {
    use idevice::RsdService;
    let connecting = "connecting to the app service";
    let (_tunnel, stream) =
        rsd_service(&p, "com.apple.coredevice.appservice", "finding the app service", connecting).await?;
    let mut app = idevice::core_device::AppServiceClient::from_stream(stream)
        .await
        .map_err(|e| ("connecting to the app service", e))?;
    match call {
        TunnelCall::Launch(l) => {
            let env: Dictionary = l.env.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            let args: Vec<&str> = l.args.iter().map(String::as_str).collect();
            let r = app
                .launch_application(&l.bundle_id, &args, true, false, Some(env), None, None)
                .await
                .map_err(|e| ("launching the app over the app service", e))?;
            Ok(u64::from(r.pid))
        }
        TunnelCall::Running(pid) => {
            let listed = app.list_processes().await.map_err(|e| ("listing processes over the app service", e))?;
            Ok(u64::from(listed.iter().any(|p| u64::from(p.pid) == pid)))
        }
        TunnelCall::Signal(pid, sig) => {
            let pid = u32::try_from(pid).unwrap_or(u32::MAX);
            app.send_signal(pid, sig).await.map_err(|e| ("stopping the app over the app service", e))?;
            Ok(u64::from(pid))
        }
    }
}
