//! Where `metrics=` serves: a loopback TCP address, an absolute Unix socket path, or any TCP
//! address the owner wrote `public:IP:PORT` (anyone who reaches it reads the figures).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where the exposition is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    /// A TCP address: loopback (`127.0.0.1:PORT`, `[::1]:PORT`), or any when written
    /// `public:IP:PORT`.
    Tcp {
        /// The address.
        addr: SocketAddr,
        /// Written `public:`: a non-loopback address the owner asked for.
        public: bool,
    },
    /// A Unix socket path (absolute).
    Unix(PathBuf),
}

/// Why a `metrics=` value is refused; the message says what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddrError {
    /// Not an address, a path or `public:` one.
    #[error(
        "give 127.0.0.1:PORT, [::1]:PORT, an absolute Unix socket path, or public:IP:PORT to \
         serve the metrics to other machines"
    )]
    Unparsed,
    /// An address that is not loopback, not written `public:`.
    #[error(
        "{ip} is not a loopback address, and anyone who reaches it could read the metrics: \
         write metrics=public:{addr} to serve them there anyway"
    )]
    NotLoopback {
        /// The address's IP.
        ip: std::net::IpAddr,
        /// The address.
        addr: SocketAddr,
    },
}

impl Addr {
    /// `metrics=VALUE`.
    pub fn parse(value: &str) -> Result<Addr, AddrError> {
        if value.starts_with('/') {
            return Ok(Addr::Unix(value.into()));
        }
        let (public, text) = match value.strip_prefix("public:") {
            Some(rest) => (true, rest),
            None => (false, value),
        };
        let addr: SocketAddr = text.parse().map_err(|_| AddrError::Unparsed)?;
        if !public && !addr.ip().is_loopback() {
            let ip = addr.ip();
            return Err(AddrError::NotLoopback { ip, addr });
        }
        Ok(Addr::Tcp { addr, public })
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { addr, public: true } => write!(f, "public:{addr}"),
            Addr::Tcp { addr, .. } => write!(f, "{addr}"),
            Addr::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_public_and_sockets_parse_and_print_as_given() {
        for v in [
            "127.0.0.1:9101",
            "[::1]:9101",
            "public:0.0.0.0:9101",
            "/run/w.sock",
        ] {
            assert_eq!(Addr::parse(v).unwrap().to_string(), v);
        }
        assert_eq!(Addr::parse("localhost:1"), Err(AddrError::Unparsed));
        let e = Addr::parse("192.0.2.1:9101").unwrap_err();
        assert!(
            e.to_string().contains("metrics=public:192.0.2.1:9101"),
            "{e}"
        );
    }
}
