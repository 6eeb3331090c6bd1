//! Who holds the other end of a TCP connection from this machine.
//!
//! A tool never approves itself, over TCP either: a `bash` command handed a
//! valid token could connect to `--listen` from the pod's own machine. For
//! a client on an address of this machine, the kernel's socket table
//! (`/proc/net/tcp`, `/proc/net/tcp6`) gives the inode of the client's
//! socket — the one whose local end is the peer address and whose remote
//! end is ours — and `/proc/*/fd` the processes holding it. If any of them
//! is a pod or a pod's descendant, or none can be found (another user's
//! process, a socket gone already), the connection may only read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `ip` is an address of this machine: loopback, or one a socket
/// can be bound to here.
pub fn is_local(ip: IpAddr) -> bool {
    let ip = unmapped(ip);
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) as the IPv4 they are.
pub fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Whether the client socket of a connection from `peer` to `ours` (both
/// on this machine) is held by a pod or a pod's descendant, or by no
/// process that can be found. Blocking: reads `/proc`.
pub fn held_by_a_tool(peer: SocketAddr, ours: SocketAddr) -> bool {
    let Some(inode) = client_inode(peer, ours) else {
        return true;
    };
    let holders = holders(inode);
    holders.is_empty()
        || holders
            .into_iter()
            .any(crate::pod::descendants::is_pod_or_descendant)
}

/// The inode of the socket whose local end is `peer` and remote end `ours`.
fn client_inode(peer: SocketAddr, ours: SocketAddr) -> Option<u64> {
    let want_local = (unmapped(peer.ip()), peer.port());
    let want_remote = (unmapped(ours.ip()), ours.port());
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(inode)) = (
                fields.get(1).and_then(|f| parse_endpoint(f)),
                fields.get(2).and_then(|f| parse_endpoint(f)),
                fields.get(9).and_then(|f| f.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let remote_matches = remote.1 == want_remote.1
                && (remote.0 == want_remote.0 || want_remote.0.is_unspecified());
            if local == want_local && remote_matches && inode != 0 {
                return Some(inode);
            }
        }
    }
    None
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit
/// word in the kernel's byte order, which is little-endian here.
fn parse_endpoint(field: &str) -> Option<(IpAddr, u16)> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(
            u32::from_str_radix(ip, 16).ok()?.swap_bytes(),
        )),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, word) in bytes.chunks_mut(4).enumerate() {
                let value = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
                word.copy_from_slice(&value.to_le_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some((unmapped(ip), port))
}

/// The processes with a descriptor on socket `inode`.
fn holders(inode: u64) -> Vec<u32> {
    let target = format!("socket:[{inode}]");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok).any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == &*target)
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_endpoints_parse_in_both_families() {
        assert_eq!(
            parse_endpoint("0100007F:1F90"),
            Some(("127.0.0.1".parse().unwrap(), 8080))
        );
        assert_eq!(
            parse_endpoint("00000000000000000000000001000000:0050"),
            Some(("::1".parse().unwrap(), 80))
        );
        assert_eq!(
            parse_endpoint("0000000000000000FFFF00000100007F:0050"),
            Some(("127.0.0.1".parse().unwrap(), 80)),
            "IPv4-mapped addresses are unmapped"
        );
    }

    #[test]
    fn a_socket_of_this_process_is_found_and_counts_as_the_pods() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(ours).unwrap();
        let peer = client.local_addr().unwrap();
        assert!(client_inode(peer, ours).is_some());
        // This test process is "the pod" for `is_pod_or_descendant`.
        assert!(held_by_a_tool(peer, ours));
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(!is_local("192.0.2.1".parse().unwrap()));
    }
}
