//! Which addresses `web_fetch` may connect to: the SSRF guard.
//!
//! A model reading a page can be told by that page to fetch
//! `http://127.0.0.1:8080/admin` or the cloud metadata service; the pod's
//! own machine and its private networks are where the user's unprotected
//! services live. So unless `--fetch-private`, an address is refused when
//! it lies in any range that is not the public internet, and the host is
//! resolved once: the connection goes to the address that was checked
//! (a second lookup could answer differently — DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be fetched, or `None` when it may. `own` are this
/// machine's own addresses.
pub fn refusal(ip: IpAddr, own: &[IpAddr]) -> Option<&'static str> {
    let mine = |ip: IpAddr| own.contains(&ip).then_some("an address of this machine");
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4).or_else(|| mine(ip)),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => refusal_v4(v4).or_else(|| mine(IpAddr::V4(v4))),
            None => refusal_v6(v6).or_else(|| mine(ip)),
        },
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, ..) => Some("0.0.0.0/8 (this network)"),
        (127, ..) => Some("127.0.0.0/8 (loopback)"),
        (10, ..) => Some("10.0.0.0/8 (private)"),
        (100, 64..=127, _) => Some("100.64.0.0/10 (carrier-grade NAT)"),
        (169, 254, _) => Some("169.254.0.0/16 (link-local, cloud metadata)"),
        (172, 16..=31, _) => Some("172.16.0.0/12 (private)"),
        (192, 0, 0) => Some("192.0.0.0/24 (IETF protocol assignments)"),
        (192, 168, _) => Some("192.168.0.0/16 (private)"),
        (198, 18..=19, _) => Some("198.18.0.0/15 (benchmarking)"),
        (224..=239, ..) => Some("224.0.0.0/4 (multicast)"),
        (240..=255, ..) => Some("240.0.0.0/4 (reserved, broadcast)"),
        _ => None,
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some(":: (unspecified)")
    } else if ip.is_loopback() {
        Some("::1 (loopback)")
    } else if first & 0xfe00 == 0xfc00 {
        Some("fc00::/7 (unique local)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("fe80::/10 (link-local)")
    } else if first & 0xff00 == 0xff00 {
        Some("ff00::/8 (multicast)")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 one stands for: `::ffff:a.b.c.d` (mapped),
/// `::a.b.c.d` (IPv4-compatible: the whole `::/96` but `::` and `::1`,
/// which are IPv6's own), `64:ff9b::a.b.c.d` (NAT64) and
/// `2002:aabb:ccdd::/48` (6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(low(hi, lo)),
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(low(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

/// This machine's own addresses (every interface's), read once per fetch.
pub fn own_addresses() -> Vec<IpAddr> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `getifaddrs` fills `list` with a linked list that stays valid
    // until `freeifaddrs`; each `ifa_addr` is null or points at a sockaddr
    // of the family it says.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return found;
        }
        let mut at = list;
        while !at.is_null() {
            let addr = (*at).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(addr as *const libc::sockaddr_in);
                        found.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(addr as *const libc::sockaddr_in6);
                        found.push(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            at = (*at).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> bool {
        refusal(ip.parse().unwrap(), &[]).is_some()
    }

    #[test]
    fn every_range_of_the_contract_is_refused_and_the_internet_is_not() {
        for ip in [
            "0.1.2.3",
            "127.0.0.1",
            "10.9.8.7",
            "100.64.0.1",
            "100.127.255.255",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.1.1.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fdff::1",
            "fe80::1",
            "febf::1",
            "ff02::1",
            // IPv4 inside IPv6.
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            // IPv4-compatible (issue 35 item 13): `[::127.0.0.1]`.
            "::127.0.0.1",
            "::10.0.0.1",
            "::169.254.169.254",
            "::0.0.0.2",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "2002:0101:0101::",
            "::1.1.1.1",
        ] {
            assert!(!refused(ip), "{ip} is public");
        }
        let own: IpAddr = "203.0.113.7".parse().unwrap();
        assert!(refusal(own, &[own]).is_some());
        assert!(refusal("::ffff:203.0.113.7".parse().unwrap(), &[own]).is_some());
        assert!(refusal("::203.0.113.7".parse().unwrap(), &[own]).is_some());
        assert_eq!(
            refusal("::".parse().unwrap(), &[]),
            Some(":: (unspecified)")
        );
        assert_eq!(refusal("::1".parse().unwrap(), &[]), Some("::1 (loopback)"));
    }
}
