//! Which listener a connection came in on: the site's (`--bind`) or the
//! operator's (`--admin`); see [`site::exposure`] for what each answers.
//!
//! Dispatch hands a worker bare connection fds, so the worker asks the
//! socket: its local address is its listener's (a wildcard listener's
//! connections carry the address they were sent to). Without `--admin`
//! every connection is public and nothing is asked; with it, one
//! `getsockname` per connection (two for a Unix socket when both kinds of
//! listener have one).

use std::io;
use std::os::fd::BorrowedFd;

use dispatch::ListenAddr;
use site::exposure::Surface;

use crate::proxy::accepted_on;

/// The admin listeners' addresses (as bound: a port 0 resolved).
#[derive(Debug, Clone, Default)]
pub struct AdminListeners {
    admin: Vec<ListenAddr>,
    /// Whether a public listener is a Unix socket too (a Unix connection
    /// then needs its path to tell).
    public_unix: bool,
}

impl AdminListeners {
    /// `admin` are the `--admin` listeners' addresses, `public` the
    /// others'.
    pub fn new(admin: Vec<ListenAddr>, public: &[ListenAddr]) -> AdminListeners {
        AdminListeners {
            admin,
            public_unix: public.iter().any(|a| matches!(a, ListenAddr::Unix(_))),
        }
    }

    /// Whether there is any admin listener.
    pub fn is_empty(&self) -> bool {
        self.admin.is_empty()
    }

    /// The listener the connection on `fd` was accepted on. A socket that
    /// cannot say (it failed meanwhile) is public: it gets the site's
    /// answers, never the operator's.
    pub fn surface_of(&self, fd: BorrowedFd<'_>) -> Surface {
        if self.admin.is_empty() {
            return Surface::Public;
        }
        let local = match reactor::sys::local_addr(fd) {
            Ok(a) => ListenAddr::Tcp(a),
            // A Unix socket (the one other family our listeners accept).
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                let unix_admin = self.admin.iter().any(|a| matches!(a, ListenAddr::Unix(_)));
                if !unix_admin {
                    return Surface::Public;
                }
                if !self.public_unix {
                    return Surface::Admin;
                }
                match dispatch::listen_addr(fd) {
                    Ok(a) => a,
                    Err(_) => return Surface::Public,
                }
            }
            Err(_) => return Surface::Public,
        };
        match self.admin.iter().any(|a| accepted_on(&local, a)) {
            true => Surface::Admin,
            false => Surface::Public,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::*;

    #[test]
    fn connections_name_their_listener() {
        let public = TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = TcpListener::bind("127.0.0.1:0").unwrap();
        let dir = std::env::temp_dir().join(format!("surface-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (upub, uadm) = (dir.join("public.sock"), dir.join("admin.sock"));
        let _ = (std::fs::remove_file(&upub), std::fs::remove_file(&uadm));
        let unix_public = UnixListener::bind(&upub).unwrap();
        let unix_admin = UnixListener::bind(&uadm).unwrap();
        let tcp = |l: &TcpListener| ListenAddr::Tcp(l.local_addr().unwrap());
        let accept_tcp = |l: &TcpListener| {
            let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            l.accept().unwrap().0
        };
        let accept_unix = |l: &UnixListener, p: &std::path::Path| {
            let _c = UnixStream::connect(p).unwrap();
            l.accept().unwrap().0
        };

        let file = std::fs::File::open("/dev/null").unwrap();
        let none = AdminListeners::default();
        assert_eq!(none.surface_of(file.as_fd()), Surface::Public);

        let tcp_only = AdminListeners::new(vec![tcp(&admin)], &[tcp(&public)]);
        let a = accept_tcp(&admin);
        let p = accept_tcp(&public);
        let u = accept_unix(&unix_public, &upub);
        assert_eq!(tcp_only.surface_of(a.as_fd()), Surface::Admin);
        assert_eq!(tcp_only.surface_of(p.as_fd()), Surface::Public);
        assert_eq!(tcp_only.surface_of(u.as_fd()), Surface::Public);
        assert_eq!(
            tcp_only.surface_of(file.as_fd()),
            Surface::Public,
            "not a socket"
        );

        let both_unix = AdminListeners::new(
            vec![ListenAddr::Unix(uadm.clone())],
            &[ListenAddr::Unix(upub.clone()), tcp(&public)],
        );
        let ua = accept_unix(&unix_admin, &uadm);
        assert_eq!(both_unix.surface_of(ua.as_fd()), Surface::Admin);
        assert_eq!(both_unix.surface_of(u.as_fd()), Surface::Public);
        assert_eq!(both_unix.surface_of(p.as_fd()), Surface::Public);

        let unix_admin_only =
            AdminListeners::new(vec![ListenAddr::Unix(uadm.clone())], &[tcp(&public)]);
        assert_eq!(unix_admin_only.surface_of(ua.as_fd()), Surface::Admin);
        assert_eq!(unix_admin_only.surface_of(p.as_fd()), Surface::Public);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
