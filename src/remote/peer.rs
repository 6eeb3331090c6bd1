//! Who holds the other end of a TCP connection from this machine.
//!
//! A tool never approves itself, over TCP either: a `bash` command handed a
//! valid token could connect to `--listen` from the pod's own machine. For
//! a client on an address of this machine, the kernel gives the inode of
//! the client's socket — the one whose local end is the peer address and
//! whose remote end is ours — through `sock_diag` (or its socket tables,
//! `/proc/net/tcp`, `/proc/net/tcp6`), and `/proc/*/fd` the processes
//! holding it. If any of them is a pod or a pod's descendant, or none can
//! be found (another user's process, a socket gone already), the
//! connection may only read.
//!
//! The socket is looked up for every client, whatever its address: what
//! decides is whether the client's socket is on this machine, and the
//! kernel's socket table says that better than any test of the address
//! (binding an IPv6 link-local address without its interface fails, which
//! once let a tool on `fe80::…` pass as another machine). A client whose
//! socket is not found is read-only only when its address is this
//! machine's ([`is_local`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `ip` is an address of this machine: loopback, one a socket can
/// be bound to here, or one an interface has (IPv6 link-local addresses
/// cannot be bound without their interface).
pub fn is_local(ip: IpAddr) -> bool {
    let ip = unmapped(ip);
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind((ip, 0)).is_ok()
        || matches!(ip, IpAddr::V6(v6) if interface_addresses_v6().contains(&v6))
}

/// The IPv6 addresses of this machine's interfaces, from
/// `/proc/net/if_inet6` (empty where it cannot be read).
fn interface_addresses_v6() -> Vec<Ipv6Addr> {
    let text = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
        .map(Ipv6Addr::from)
        .collect()
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

/// Whether the client socket of a connection from `peer` to `ours` is
/// held by a pod or a pod's descendant, or is on this machine (by its
/// address) and held by no process that can be found. Blocking: reads
/// `/proc`.
pub fn held_by_a_tool(peer: SocketAddr, ours: SocketAddr) -> bool {
    let Some(inode) = client_inode(peer, ours) else {
        return is_local(peer.ip());
    };
    let holders = holders(inode);
    holders.is_empty()
        || holders
            .into_iter()
            .any(crate::pod::descendants::is_tool_process)
}

/// The inode of the socket whose local end is `peer` and remote end `ours`.
///
/// Asked of the kernel by its exact addresses (`sock_diag`, one hash
/// lookup) when `ours` is a specific address; else, or when that fails,
/// found in the socket tables, which the kernel prints by walking its
/// whole connection hash table (several ms per read on a machine with much
/// memory, whatever the number of connections).
fn client_inode(peer: SocketAddr, ours: SocketAddr) -> Option<u64> {
    if !ours.ip().is_unspecified() {
        if let Some(inode) = diag::inode(peer, ours) {
            return Some(inode);
        }
    }
    table_inode(peer, ours)
}

/// [`client_inode`] from `/proc/net/tcp` and `/proc/net/tcp6`.
fn table_inode(peer: SocketAddr, ours: SocketAddr) -> Option<u64> {
    use std::io::Read as _;
    let want_local = (unmapped(peer.ip()), peer.port());
    let want_remote = (unmapped(ours.ip()), ours.port());
    let mut chunk = vec![0u8; 256 << 10];
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        // In large reads: each read of the file resumes the kernel's walk
        // of its hash table, and `read_to_string` starts with tiny ones.
        let Ok(mut file) = std::fs::File::open(table) else {
            continue;
        };
        let mut bytes = Vec::new();
        loop {
            match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let text = String::from_utf8_lossy(&bytes);
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

/// The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`): one TCP socket
/// looked up by its exact addresses.
mod diag {
    use std::net::{IpAddr, SocketAddr};

    use rustix::net::{
        netlink, recv, send, socket_with, AddressFamily, RecvFlags, SendFlags, SocketFlags,
        SocketType,
    };

    use super::unmapped;

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const NLM_F_REQUEST: u16 = 1;
    const AF_INET: u8 = 2;
    const AF_INET6: u8 = 10;
    const IPPROTO_TCP: u8 = 6;
    /// `nlmsghdr`, then `inet_diag_req_v2` (whose `inet_diag_sockid` is 48).
    const REQUEST_LEN: usize = 16 + 8 + 48;
    /// Where `idiag_inode` sits in an answer: after `nlmsghdr` (16) and
    /// `inet_diag_msg`'s family…retrans (4), id (48), expires, rqueue,
    /// wqueue and uid (16).
    const INODE_AT: usize = 16 + 4 + 48 + 16;

    /// The inode of the TCP socket whose local end is `local` and remote
    /// end `remote`; `None` when there is none or the kernel cannot say.
    pub fn inode(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
        let (l, r) = (unmapped(local.ip()), unmapped(remote.ip()));
        match (l, r) {
            // An IPv4 connection: an AF_INET socket, or an AF_INET6 one
            // that connected to a v4-mapped address.
            (IpAddr::V4(lv4), IpAddr::V4(rv4)) => {
                let mut ls = [0u8; 16];
                let mut rs = [0u8; 16];
                ls[..4].copy_from_slice(&lv4.octets());
                rs[..4].copy_from_slice(&rv4.octets());
                ask(AF_INET, (ls, local.port()), (rs, remote.port())).or_else(|| {
                    ask(
                        AF_INET6,
                        (lv4.to_ipv6_mapped().octets(), local.port()),
                        (rv4.to_ipv6_mapped().octets(), remote.port()),
                    )
                })
            }
            (IpAddr::V6(lv6), IpAddr::V6(rv6)) => ask(
                AF_INET6,
                (lv6.octets(), local.port()),
                (rv6.octets(), remote.port()),
            ),
            _ => None,
        }
    }

    fn ask(family: u8, local: ([u8; 16], u16), remote: ([u8; 16], u16)) -> Option<u64> {
        let socket = socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )
        .ok()?;
        let mut request = Vec::with_capacity(REQUEST_LEN);
        request.extend_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
        request.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        request.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        request.extend_from_slice(&1u32.to_ne_bytes()); // seq
        request.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
        request.extend_from_slice(&[family, IPPROTO_TCP, 0, 0]);
        request.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
        request.extend_from_slice(&local.1.to_be_bytes());
        request.extend_from_slice(&remote.1.to_be_bytes());
        request.extend_from_slice(&local.0);
        request.extend_from_slice(&remote.0);
        request.extend_from_slice(&0u32.to_ne_bytes()); // any interface
        request.extend_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
        send(&socket, &request, SendFlags::empty()).ok()?;
        // The kernel answers within the send; never wait for it here.
        let mut answer = [0u8; 1024];
        let n = recv(&socket, &mut answer, RecvFlags::DONTWAIT).ok()?;
        let answer = answer.get(..n)?;
        let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
        if kind == NLMSG_ERROR || kind != SOCK_DIAG_BY_FAMILY {
            return None;
        }
        // The socket it describes must be the one asked about.
        let id = answer.get(16 + 4..16 + 4 + 36)?;
        if id[0..2] != local.1.to_be_bytes()
            || id[2..4] != remote.1.to_be_bytes()
            || id[4..20] != local.0
            || id[20..36] != remote.0
        {
            return None;
        }
        let inode = u32::from_ne_bytes(answer.get(INODE_AT..INODE_AT + 4)?.try_into().ok()?);
        (inode != 0).then_some(u64::from(inode))
    }
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
        .filter(|&pid| holds(pid, target.as_bytes()))
        .collect()
}

/// Whether process `pid` has a descriptor whose link reads `target`.
///
/// This reads every descriptor's link of every process on each local
/// connect, so each is read relative to the open `fd` directory, into a
/// buffer on the stack: the kernel looks up one name, not the whole
/// `/proc/PID/fd/N` path, and nothing is allocated per descriptor. A link
/// longer than the buffer is cut short, and then is not `target` anyway.
fn holds(pid: u32, target: &[u8]) -> bool {
    use rustix::fs::{openat, readlinkat_raw, Dir, Mode, OFlags, CWD};
    let Ok(dir) = openat(
        CWD,
        format!("/proc/{pid}/fd"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(copy) = dir.try_clone() else {
        return false;
    };
    let Ok(entries) = Dir::new(copy) else {
        return false;
    };
    let mut link = [std::mem::MaybeUninit::<u8>::uninit(); 64];
    entries.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        name.to_bytes().first() != Some(&b'.')
            && readlinkat_raw(&dir, name, &mut link).is_ok_and(|(read, _)| read == target)
    })
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
        let inode = client_inode(peer, ours);
        assert!(inode.is_some());
        assert_eq!(diag::inode(peer, ours), inode, "sock_diag finds it");
        assert_eq!(table_inode(peer, ours), inode, "so do the tables");
        // This test process is "the pod" for `is_tool_process`.
        assert!(held_by_a_tool(peer, ours));
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(!is_local("192.0.2.1".parse().unwrap()));
    }
}
