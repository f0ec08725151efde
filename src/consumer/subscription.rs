//! Subscriptions: tag expressions and SQL92 selectors turned into `SubscriptionData`
//! (Java `FilterAPI.buildSubscriptionData`, `MessageSelector`).

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::protocol::heartbeat::{java_string_hash, SubscriptionData};

/// Expression type of a tag filter.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Expression type of an SQL92 property filter.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";
/// Subscribe to every tag.
pub const SUB_ALL: &str = "*";

/// Which messages of a topic a consumer wants (Java `MessageSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSelector {
    /// `*` or `TagA || TagB`.
    Tag(String),
    /// An SQL92 expression over message properties (broker needs `enablePropertyFilter=true`).
    Sql92(String),
}

impl MessageSelector {
    /// A tag expression.
    pub fn by_tag(expr: impl Into<String>) -> Self {
        MessageSelector::Tag(expr.into())
    }

    /// An SQL92 expression.
    pub fn by_sql(expr: impl Into<String>) -> Self {
        MessageSelector::Sql92(expr.into())
    }
}

/// Builds the subscription of `topic` with a fresh version (now, in ms).
pub fn build_subscription_data(
    topic: &str,
    selector: &MessageSelector,
) -> Result<SubscriptionData> {
    let version = crate::util::now_millis();
    match selector {
        MessageSelector::Tag(expr) => {
            let expr = expr.trim();
            let mut tags = BTreeSet::new();
            let mut codes = BTreeSet::new();
            let sub_string = if expr.is_empty() || expr == SUB_ALL {
                SUB_ALL.to_string()
            } else {
                for tag in expr.split("||").map(str::trim).filter(|t| !t.is_empty()) {
                    codes.insert(java_string_hash(tag));
                    tags.insert(tag.to_string());
                }
                if tags.is_empty() {
                    return Err(Error::invalid_argument(format!(
                        "the tag expression {expr:?} names no tag"
                    )));
                }
                expr.to_string()
            };
            Ok(SubscriptionData {
                class_filter_mode: false,
                topic: topic.to_string(),
                sub_string,
                tags_set: tags,
                code_set: codes,
                sub_version: version,
                expression_type: EXPRESSION_TYPE_TAG.to_string(),
            })
        }
        MessageSelector::Sql92(sql) => {
            if sql.trim().is_empty() {
                return Err(Error::invalid_argument("the SQL92 expression is empty"));
            }
            Ok(SubscriptionData {
                class_filter_mode: false,
                topic: topic.to_string(),
                sub_string: sql.trim().to_string(),
                tags_set: BTreeSet::new(),
                code_set: BTreeSet::new(),
                sub_version: version,
                expression_type: EXPRESSION_TYPE_SQL92.to_string(),
            })
        }
    }
}

/// Whether a message with `tags` passes the subscription's tag filter (the client-side
/// re-check of `PullAPIWrapper.processPullResult`; SQL filtering is the broker's).
pub fn tag_matches(sub: &SubscriptionData, tags: Option<&str>) -> bool {
    !filters_by_tag(sub) || tags.is_some_and(|t| sub.tags_set.contains(t))
}

/// Whether [`tag_matches`] looks at a message's tags at all: not for `*`, an empty tag
/// set or another expression type (the broker filtered those), so a caller can skip
/// finding the tags of every message.
pub(crate) fn filters_by_tag(sub: &SubscriptionData) -> bool {
    sub.expression_type == EXPRESSION_TYPE_TAG
        && !sub.tags_set.is_empty()
        && sub.sub_string != SUB_ALL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions_build_like_java() {
        let s = build_subscription_data("T", &MessageSelector::by_tag(" TagA || TagB ||")).unwrap();
        assert_eq!(s.tags_set.iter().collect::<Vec<_>>(), vec!["TagA", "TagB"]);
        assert!(s.code_set.contains(&2598919), "Java \"TagA\".hashCode()");
        assert_eq!(s.expression_type, "TAG");
        let all = build_subscription_data("T", &MessageSelector::by_tag("*")).unwrap();
        assert_eq!(all.sub_string, "*");
        assert!(all.tags_set.is_empty());
        assert!(build_subscription_data("T", &MessageSelector::by_tag("||")).is_err());
        assert!(build_subscription_data("T", &MessageSelector::by_sql(" ")).is_err());
    }

    #[test]
    fn client_side_tag_filter() {
        let s = build_subscription_data("T", &MessageSelector::by_tag("A||B")).unwrap();
        assert!(tag_matches(&s, Some("A")));
        assert!(!tag_matches(&s, Some("C")));
        assert!(!tag_matches(&s, None));
        let all = build_subscription_data("T", &MessageSelector::by_tag("*")).unwrap();
        assert!(tag_matches(&all, None));
        assert!(filters_by_tag(&s) && !filters_by_tag(&all));
    }
}
