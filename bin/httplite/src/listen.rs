//! Where the server listens: the `--bind` and `--admin` addresses, bound
//! here, or the sockets inherited from whoever started us.
//!
//! Two ways to inherit:
//! - **Socket activation** (systemd's protocol): `LISTEN_PID` is our PID,
//!   `LISTEN_FDS` says how many sockets start at fd 3, `LISTEN_FDNAMES`
//!   (optional) names them. Each fd is one listener.
//! - **Binary upgrade** (see [`crate::upgrade`]): the previous process
//!   passes its sockets in `HTTPLITE_LISTEN_FDS`, listeners separated by
//!   `,`, the sockets of one listener (one per worker in reuseport mode) by
//!   `+`: `3+4,5`.
//!
//! Inherited sockets must match `--bind` when it is given (a port 0 in
//! `--bind` matches any port), and every `--admin` must be among them (the
//! rest are `--bind`'s); a mismatch is a one-line error. The
//! variables are removed from the environment once read, so that no child
//! mistakes them for its own.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use dispatch::{Endpoint, ListenAddr, Listener};

use crate::cli::BindAddr;

/// The upgrade's variable (see the module docs).
pub const UPGRADE_FDS_VAR: &str = "HTTPLITE_LISTEN_FDS";
/// The first fd of socket activation.
const SD_LISTEN_FDS_START: RawFd = 3;

/// What [`open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The listeners: the public ones (in `--bind` order when it was
    /// given), then the last [`admin`](Opened::admin) are `--admin`'s.
    pub listeners: Vec<Listener>,
    /// How many of `listeners`, at the end, are admin listeners.
    pub admin: usize,
    /// `Some("socket activation")` or `Some("upgrade")` when inherited.
    pub inherited: Option<&'static str>,
}

/// Binds `binds` (default `127.0.0.1:8080`) and `admins`, or takes the
/// inherited sockets and checks them against both. `copies` is the number
/// of sockets per TCP address (the workers, in reuseport mode).
pub fn open(
    binds: &[BindAddr],
    admins: &[BindAddr],
    socket_mode: Option<u32>,
    copies: usize,
    backlog: i32,
) -> Result<Opened> {
    if let Some((how, listeners)) = inherited()? {
        let (admin, rest) = take_admins(how, listeners, admins)?;
        let mut listeners = match_binds(how, rest, binds)?;
        let count = admin.len();
        listeners.extend(admin);
        return Ok(Opened {
            listeners,
            admin: count,
            inherited: Some(how),
        });
    }
    let default = [BindAddr::Tcp(([127, 0, 0, 1], 8080).into())];
    let binds = if binds.is_empty() {
        &default[..]
    } else {
        binds
    };
    let mut listeners = Vec::with_capacity(binds.len() + admins.len());
    for (bind, flag) in
        (binds.iter().map(|b| (b, "--bind"))).chain(admins.iter().map(|a| (a, "--admin")))
    {
        let endpoint = match bind {
            BindAddr::Tcp(a) => Endpoint::Tcp(*a),
            BindAddr::Unix(p) => Endpoint::Unix {
                path: p.clone(),
                mode: socket_mode,
            },
        };
        let copies = match bind {
            BindAddr::Tcp(_) => copies,
            BindAddr::Unix(_) => 1,
        };
        let l = Listener::bind(&endpoint, copies, backlog)
            .with_context(|| format!("{flag} {bind}: cannot listen"))?;
        listeners.push(l);
    }
    Ok(Opened {
        listeners,
        admin: admins.len(),
        inherited: None,
    })
}

/// The sockets passed to us, if any (and the variables removed).
fn inherited() -> Result<Option<(&'static str, Vec<Listener>)>> {
    let upgrade = std::env::var(UPGRADE_FDS_VAR).ok();
    let pid = std::env::var("LISTEN_PID").ok();
    let count = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    for var in [
        UPGRADE_FDS_VAR,
        "LISTEN_PID",
        "LISTEN_FDS",
        "LISTEN_FDNAMES",
    ] {
        // SAFETY: called from `main` before any other thread exists (the
        // environment is not being read concurrently).
        unsafe { std::env::remove_var(var) };
    }
    if let Some(spec) = upgrade {
        let mut listeners = Vec::new();
        for group in spec.split(',').filter(|g| !g.is_empty()) {
            let fds = group
                .split('+')
                .map(|n| n.parse::<RawFd>().ok().filter(|&fd| fd > 2))
                .collect::<Option<Vec<RawFd>>>()
                .with_context(|| format!("{UPGRADE_FDS_VAR}={spec}: not a list of fds"))?;
            let fds = fds.into_iter().map(take_fd).collect::<Result<Vec<_>>>()?;
            listeners.push(
                Listener::from_fds(fds)
                    .with_context(|| format!("{UPGRADE_FDS_VAR}={spec}: unusable socket"))?,
            );
        }
        return Ok(Some(("upgrade", listeners)));
    }
    let (Some(pid), Some(count)) = (pid, count) else {
        return Ok(None);
    };
    // For another process (our parent's): not ours to take.
    if pid.parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(None);
    }
    let n: RawFd = count
        .parse()
        .ok()
        .filter(|n| (1..=1024).contains(n))
        .with_context(|| format!("socket activation: LISTEN_FDS={count} is not a count"))?;
    let names: Vec<&str> = names
        .as_deref()
        .map_or(Vec::new(), |n| n.split(':').collect());
    let mut listeners = Vec::new();
    for i in 0..n {
        let fd = SD_LISTEN_FDS_START + i;
        let name = names.get(i as usize).copied().unwrap_or("unknown");
        let l = Listener::from_fds(vec![take_fd(fd)?]).with_context(|| {
            format!("socket activation: fd {fd} ({name}) is not a listening stream socket")
        })?;
        listeners.push(l);
    }
    Ok(Some(("socket activation", listeners)))
}

/// Takes ownership of an inherited fd, after checking it is open.
fn take_fd(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: F_GETFD takes no argument and touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        bail!("inherited fd {fd} is not open");
    }
    // SAFETY: the fd is open, and the protocol that passed it gives it to
    // this process alone; it is taken once, at start-up, before anything
    // else could have claimed the number.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Takes the inherited listeners `--admin` names, in its order, out of
/// `inherited`; the rest are returned as `--bind`'s.
fn take_admins(
    how: &str,
    mut inherited: Vec<Listener>,
    admins: &[BindAddr],
) -> Result<(Vec<Listener>, Vec<Listener>)> {
    let mut taken = Vec::with_capacity(admins.len());
    for admin in admins {
        // From the end: an upgrade passes the admin listeners last, so
        // that an `--admin` with port 0 takes its own and not a public
        // listener on the same address.
        match inherited.iter().rposition(|l| matches(admin, l.addr())) {
            Some(i) => taken.push(inherited.remove(i)),
            None => {
                let passed: Vec<String> = (taken.iter().chain(&inherited))
                    .map(|l| l.addr().to_string())
                    .collect();
                bail!(
                    "{how} passed {} but --admin asks for {admin}",
                    if passed.is_empty() {
                        "nothing".into()
                    } else {
                        passed.join(", ")
                    }
                );
            }
        }
    }
    Ok((taken, inherited))
}

/// Checks inherited listeners against `--bind` (when given) and orders
/// them as `--bind` does.
fn match_binds(
    how: &str,
    mut inherited: Vec<Listener>,
    binds: &[BindAddr],
) -> Result<Vec<Listener>> {
    if binds.is_empty() {
        return Ok(inherited);
    }
    let mismatch = |inherited: &[Listener]| {
        let passed: Vec<String> = inherited.iter().map(|l| l.addr().to_string()).collect();
        let asked: Vec<String> = binds.iter().map(ToString::to_string).collect();
        anyhow::anyhow!(
            "{how} passed {} but --bind asks for {}",
            if passed.is_empty() {
                "nothing".into()
            } else {
                passed.join(", ")
            },
            asked.join(", ")
        )
    };
    if inherited.len() != binds.len() {
        return Err(mismatch(&inherited));
    }
    let mut ordered = Vec::with_capacity(binds.len());
    for bind in binds {
        match inherited.iter().position(|l| matches(bind, l.addr())) {
            Some(i) => ordered.push(inherited.remove(i)),
            None => {
                ordered.append(&mut inherited);
                return Err(mismatch(&ordered));
            }
        }
    }
    Ok(ordered)
}

/// Whether an inherited socket's address is what `bind` asks for.
fn matches(bind: &BindAddr, addr: &ListenAddr) -> bool {
    match (bind, addr) {
        (BindAddr::Tcp(want), ListenAddr::Tcp(have)) => {
            want.ip() == have.ip() && (want.port() == 0 || want.port() == have.port())
        }
        (BindAddr::Unix(want), ListenAddr::Unix(have)) => want == have,
        _ => false,
    }
}

/// The display form of a listener's address in the start-up line: a URL
/// for TCP, `unix:PATH` for a Unix socket.
pub fn url(addr: &ListenAddr, https: bool) -> String {
    match addr {
        ListenAddr::Tcp(a) => format!("{}://{a}", if https { "https" } else { "http" }),
        ListenAddr::Unix(p) => format!("unix:{}", p.display()),
    }
}

/// A Unix listener's path, if it is one.
pub fn unix_path(addr: &ListenAddr) -> Option<&PathBuf> {
    match addr {
        ListenAddr::Unix(p) => Some(p),
        ListenAddr::Tcp(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_matches_any_port() {
        let want = BindAddr::parse("127.0.0.1:0").unwrap();
        assert!(matches(
            &want,
            &ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
        ));
        assert!(!matches(
            &want,
            &ListenAddr::Tcp("127.0.0.2:8080".parse().unwrap())
        ));
        let want = BindAddr::parse("[::1]:80").unwrap();
        assert!(matches(
            &want,
            &ListenAddr::Tcp("[::1]:80".parse().unwrap())
        ));
        assert!(!matches(
            &want,
            &ListenAddr::Tcp("[::1]:81".parse().unwrap())
        ));
        let want = BindAddr::parse("unix:/run/x.sock").unwrap();
        assert!(matches(&want, &ListenAddr::Unix("/run/x.sock".into())));
        assert!(!matches(&want, &ListenAddr::Unix("/run/y.sock".into())));
    }
}
