//! Namespace wrapping of topics and groups (Java `NamespaceUtil`): `ns%name`, keeping
//! the `%RETRY%`/`%DLQ%` prefix in front.

const SEPARATOR: char = '%';
use super::validators::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};

fn is_system_resource(resource: &str) -> bool {
    resource == super::validators::AUTO_CREATE_TOPIC_KEY_TOPIC
        || resource.starts_with("rmq_sys_")
        || resource.starts_with("CID_RMQ_SYS_")
        || super::validators::NOT_ALLOWED_SEND_TOPICS.contains(&resource)
        || matches!(
            resource,
            "TOOLS_CONSUMER"
                | "SCHEDULE_CONSUMER"
                | "FILTERSRV_CONSUMER"
                | "__MONITOR_CONSUMER"
                | "CLIENT_INNER_PRODUCER"
                | "SELF_TEST_P_GROUP"
                | "SELF_TEST_C_GROUP"
                | "BenchmarkTest"
                | "RMQ_SYS_TRACE_TOPIC"
        )
}

fn split_prefix(resource: &str) -> (&str, &str) {
    for p in [RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX] {
        if let Some(rest) = resource.strip_prefix(p) {
            return (p, rest);
        }
    }
    ("", resource)
}

/// `wrapNamespace(ns, resource)`.
pub fn wrap(namespace: Option<&str>, resource: &str) -> String {
    let Some(ns) = namespace.filter(|n| !n.is_empty()) else {
        return resource.to_string();
    };
    if resource.is_empty() || is_system_resource(resource) {
        return resource.to_string();
    }
    let (prefix, bare) = split_prefix(resource);
    if bare.starts_with(&format!("{ns}{SEPARATOR}")) {
        return resource.to_string();
    }
    format!("{prefix}{ns}{SEPARATOR}{bare}")
}

/// `withoutNamespace(resource, ns)`.
pub fn unwrap(namespace: Option<&str>, resource: &str) -> String {
    let Some(ns) = namespace.filter(|n| !n.is_empty()) else {
        return resource.to_string();
    };
    let (prefix, bare) = split_prefix(resource);
    match bare.strip_prefix(&format!("{ns}{SEPARATOR}")) {
        Some(rest) => format!("{prefix}{rest}"),
        None => resource.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_and_unwrap_like_java() {
        let ns = Some("ns");
        assert_eq!(wrap(ns, "T"), "ns%T");
        assert_eq!(wrap(ns, "ns%T"), "ns%T");
        assert_eq!(wrap(ns, "%RETRY%g"), "%RETRY%ns%g");
        assert_eq!(wrap(ns, "%DLQ%g"), "%DLQ%ns%g");
        assert_eq!(wrap(ns, "TBW102"), "TBW102");
        assert_eq!(wrap(None, "T"), "T");
        assert_eq!(unwrap(ns, "ns%T"), "T");
        assert_eq!(unwrap(ns, "%RETRY%ns%g"), "%RETRY%g");
        assert_eq!(unwrap(ns, "other%T"), "other%T");
    }
}
