//! Which bucket a request is for, from its `Host`: `<bucket>.<root_domain>`,
//! or else a global bucket alias equal to the whole host name. The port is
//! ignored, and so is the case of the name (DNS names are case-insensitive).

/// The host name of a `Host` header value (or URI authority), without its
/// port, lowercased, without a final dot. `None` when empty.
pub fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        // An IPv6 literal: "[::1]:3902".
        rest.split(']').next().unwrap_or(rest)
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map(|(name, _)| name)
            .unwrap_or(host)
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// The bucket name a host name designates under `root_domain` (given with
/// or without its leading dot): the label(s) before `.<root_domain>`, or
/// the whole host name when it is not under the root domain.
pub fn bucket_name(host: &str, root_domain: &str) -> String {
    let root = root_domain.trim_start_matches('.').to_ascii_lowercase();
    if !root.is_empty() {
        if let Some(b) = host.strip_suffix(&root).and_then(|b| b.strip_suffix('.')) {
            if !b.is_empty() {
                return b.to_string();
            }
        }
    }
    host.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        assert_eq!(
            host_name("Site.Web.Example:3902").as_deref(),
            Some("site.web.example")
        );
        assert_eq!(
            host_name("site.web.example.").as_deref(),
            Some("site.web.example")
        );
        assert_eq!(host_name("127.0.0.1:80").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_name("[::1]:3902").as_deref(), Some("::1"));
        assert_eq!(
            host_name("www.example.org").as_deref(),
            Some("www.example.org")
        );
        assert_eq!(host_name(""), None);
        assert_eq!(host_name(":80"), None);
    }

    #[test]
    fn bucket_names() {
        let root = ".web.example";
        assert_eq!(bucket_name("site.web.example", root), "site");
        assert_eq!(bucket_name("my.site.web.example", root), "my.site");
        assert_eq!(bucket_name("site.web.example", "web.example"), "site");
        // Not under the root domain: the whole name is the alias.
        assert_eq!(bucket_name("www.example.org", root), "www.example.org");
        assert_eq!(bucket_name("web.example", root), "web.example");
        assert_eq!(bucket_name("xweb.example", root), "xweb.example");
        assert_eq!(bucket_name("site.web.example", ""), "site.web.example");
    }
}
