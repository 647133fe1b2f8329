//! What the `graphs_*` tests share.

use weir::{NodeDef, TaskSpec};
use weir_core::names::Name;

/// Node `name` after `ups`, running `task`, with a single attempt: a
/// failure is final, so the tests see it at once.
pub fn node(name: &str, ups: &[&str], task: &str) -> NodeDef {
    let mut n = NodeDef::new(
        Name::new(name).unwrap(),
        ups.iter().map(|u| Name::new(*u).unwrap()).collect(),
        TaskSpec {
            task: Name::new(task).unwrap(),
            config: serde_json::Value::Null,
        },
    );
    n.retry = weir::RetryPolicy::once();
    n
}
