//! What the web tools share: the HTTP client, and the address checks that keep `web_fetch`
//! from reaching the machine's own network (SSRF).
//!
//! Every address a fetch may connect to passes [`check_ip`]: the URL's host when it is an IP
//! literal (the URL parser has already turned `2130706433`, `0x7f.1` or `127.1` into
//! `127.0.0.1`), and every address a name resolves to (in the resolver the client uses, so the check
//! holds for the address actually connected to, not for an earlier lookup a DNS rebinding
//! could change). Redirects are followed by hand, each hop checked the same way. There is no
//! proxy (reqwest's system-proxy feature is off), so nothing bypasses the resolver.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

/// Why an address is refused, or `None` when it is public.
pub fn check_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => check_v4(v4),
        IpAddr::V6(v6) => check_v6(v6),
    }
}

fn check_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address (\"this host\")")
    } else if ip.is_private() {
        Some("a private network address")
    } else if ip.is_link_local() {
        Some("a link-local address (cloud metadata services live here)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address, used by some metadata services")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("an IETF protocol address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("a benchmarking network address")
    } else if ip.is_documentation() {
        Some("a documentation address")
    } else {
        None
    }
}

/// The IPv4 address in the low 32 bits of an IPv6 one.
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let [.., a, b, c, d] = ip.octets();
    Ipv4Addr::new(a, b, c, d)
}

fn check_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    // IPv4 embedded in IPv6: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64
    // (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::) are checked as the IPv4 they carry.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return check_v4(v4);
    }
    if segments[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return check_v4(low_v4(ip));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return check_v4(low_v4(ip));
    }
    if segments[0] == 0x2002 {
        let [hi, lo] = [segments[1], segments[2]];
        return check_v4(Ipv4Addr::from_bits((u32::from(hi) << 16) | u32::from(lo)));
    }
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("a unique local (private) address")
    } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
        Some("a link-local or site-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if segments[0] == 0x2001 && segments[1] == 0x0db8 {
        Some("a documentation address")
    } else if segments[0] == 0x2001 && segments[1] == 0 {
        Some("a Teredo address, which can reach private networks")
    } else if segments[0] == 0x100 && segments[1..4] == [0, 0, 0] {
        Some("a discard-only address")
    } else {
        None
    }
}

/// The URL's host when it is an IP address (the parser has normalised its spelling).
pub(crate) fn host_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse().ok()
}

/// The error when a URL's host is refused.
pub(crate) fn refusal(host: &str, why: &str) -> String {
    format!(
        "refused to fetch from `{host}`: it is {why}. Fetching local and private addresses is off \
         by default (against SSRF); a user who wants it sets `allow_local = true` under \
         [tools.web_fetch] in the config file"
    )
}

/// Looks names up; [`GuardedResolver`] wraps the system resolver, tests wrap a stub.
pub(crate) type Lookup = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> + Send + Sync,
>;

/// The system's resolver (`getaddrinfo`, off the runtime).
pub(crate) fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    })
}

/// Resolves names, keeping only the addresses [`check_ip`] allows.
#[derive(Clone)]
pub(crate) struct GuardedResolver {
    lookup: Lookup,
}

impl GuardedResolver {
    pub(crate) fn new(lookup: Lookup) -> Self {
        Self { lookup }
    }

    /// The allowed addresses of a name; an error when there are none.
    pub(crate) async fn resolve_checked(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let all = (self.lookup)(host.to_owned()).await?;
        let mut refused = None;
        let allowed: Vec<IpAddr> = all
            .into_iter()
            .filter(|ip| match check_ip(*ip) {
                Some(why) => {
                    refused.get_or_insert((*ip, why));
                    false
                }
                None => true,
            })
            .collect();
        match (allowed.is_empty(), refused) {
            (true, Some((ip, why))) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                refusal(&format!("{host} ({ip})"), why),
            )),
            (true, None) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{host}` has no address"),
            )),
            (false, _) => Ok(allowed),
        }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = this.resolve_checked(&host).await.map_err(Box::new)?;
            let addrs: reqwest::dns::Addrs =
                Box::new(addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// Resolves names with no check (the user allowed local fetches).
#[derive(Clone)]
struct OpenResolver;

impl reqwest::dns::Resolve for OpenResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.collect::<Vec<_>>().into_iter());
            Ok(addrs)
        })
    }
}

/// Installs rustls' `ring` crypto provider as the process default, if none is yet.
///
/// gimlet-tools builds reqwest with rustls but no built-in provider (to avoid aws-lc's C build).
/// Cargo unifies features, so a program that also builds its own `reqwest::Client` must call
/// this first (the web tools call it themselves). Calling it twice is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The user agent the web tools send.
pub(crate) const USER_AGENT: &str = concat!(
    "gimlet/",
    env!("CARGO_PKG_VERSION"),
    " (MCP tool server; +https://github.com/gimlet-mcp/gimlet)"
);

/// An HTTP client: no proxy, no automatic redirects (the caller follows and checks them),
/// rustls with the platform's roots. `allow_local: false` guards every resolved address.
pub(crate) fn client(allow_local: bool) -> Result<reqwest::Client, String> {
    install_crypto_provider();
    let builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10));
    let builder = if allow_local {
        builder.dns_resolver(Arc::new(OpenResolver))
    } else {
        builder.dns_resolver(Arc::new(GuardedResolver::new(system_lookup())))
    };
    builder
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        check_ip(text.parse().unwrap()).is_some()
    }

    #[test]
    fn local_private_and_metadata_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "127.255.1.2",
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254", // AWS, GCP, Azure metadata
            "100.100.100.200", // Alibaba metadata (CGNAT range)
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254", // AWS metadata over IPv6
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
            "2002:7f00:1::",      // 6to4 of 127.0.0.1
            "2001:0:4136:e378::", // Teredo
            "ff02::1",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in [
            "93.184.215.14",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "172.32.0.1",
        ] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn every_spelling_of_an_address_parses_to_the_same_host() {
        // The URL parser (WHATWG) normalises the spellings an attacker would use.
        for url in [
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0x7f.1/",
            "http://[::ffff:7f00:1]/",
            "http://[0:0:0:0:0:ffff:127.0.0.1]/",
        ] {
            let url = reqwest::Url::parse(url).unwrap();
            let ip = host_ip(&url).unwrap();
            assert!(check_ip(ip).is_some(), "{url} -> {ip}");
        }
    }

    fn stub(answers: Vec<&'static str>) -> GuardedResolver {
        GuardedResolver::new(Arc::new(move |_host: String| {
            let ips = answers.iter().map(|a| a.parse().unwrap()).collect();
            Box::pin(async move { Ok(ips) })
        }))
    }

    #[tokio::test]
    async fn names_that_resolve_to_local_addresses_are_refused() {
        let err = stub(vec!["169.254.169.254"])
            .resolve_checked("metadata.example")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("link-local"), "{err}");
        let err = stub(vec!["10.0.0.5", "::1"])
            .resolve_checked("intranet.example")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("allow_local"), "{err}");
        // A name with public and private addresses (a rebinding attempt) keeps only the public.
        let mixed = stub(vec!["127.0.0.1", "93.184.215.14"])
            .resolve_checked("rebind.example")
            .await
            .unwrap();
        assert_eq!(mixed, vec!["93.184.215.14".parse::<IpAddr>().unwrap()]);
    }
}
