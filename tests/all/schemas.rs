//! Tool input schemas: a tool's own schema is hostile input. One over a
//! load bound refuses the component, naming the tool, the bound and the
//! place; one that loads cannot make checking an input cost more than the
//! validator's step budget, and the guest never runs when it does.

use std::time::{Duration, Instant};

use longhand_hands::builtin::BUILTINS;
use longhand_hands::{Grants, LoadError, ToolSource};
use serde_json::{Value, json};

use crate::fixtures;
use crate::support::{assert_still_serves, hands, limit_message, ok};

#[tokio::test]
async fn any_of_chain_bomb_is_refused_at_load_naming_the_bound() {
    let started = Instant::now();
    let err = match hands()
        .load(ToolSource::File(fixtures::SCHEMA_BOMB.as_ref()))
        .await
    {
        Ok(tool) => panic!("{} loaded, but its schema is a bomb", tool.label()),
        Err(err) => err,
    };
    let elapsed = started.elapsed();
    let LoadError::Describe { reason, .. } = &err else {
        panic!("expected a describe error, got {err:?}");
    };
    // Which tool, which bound, where: the innermost `$defs` link whose
    // count passes 1,000 (2^(k+2) - 3 at k = 8 links from the end of 64).
    assert!(reason.contains("tool `bomb`"), "{reason}");
    assert!(reason.contains("over the bound of 1000"), "{reason}");
    assert!(
        reason.contains("#/$defs/d56 evaluates 1021 subschemas"),
        "{reason}"
    );
    // jsonschema took 40 s of CPU on this; compiling the component is
    // most of what is left.
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    assert_still_serves().await;
}

/// Nested arrays `depth` deep with a number at the bottom.
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

#[tokio::test]
async fn costly_input_ends_at_the_step_budget_before_the_guest_runs() {
    let tool = hands()
        .load(ToolSource::File(fixtures::SCHEMA_COSTLY.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("the costly schema passes the load bounds: {e}"));

    // Both `anyOf` branches descend: 2^40 evaluations unless stopped.
    let outcome = hands()
        .call(&tool, &Grants::default(), "nest", &nested(40))
        .await;
    let message = limit_message(&outcome);
    assert!(message.contains("budget of 1000000 steps"), "{message}");
    assert!(
        outcome.receipt.limits_hit.iter().any(|m| m == message),
        "{:?}",
        outcome.receipt.limits_hit
    );
    assert_eq!(outcome.receipt.fuel_used, 0, "the guest ran");

    // The same tool still takes an ordinary input, and the host serves others.
    let fine = hands()
        .call(&tool, &Grants::default(), "nest", &json!([[], [[]]]))
        .await;
    assert_eq!(ok(&fine), &json!({ "ran": true }));
    assert_still_serves().await;
}

/// The schemas schemars derives for the built-in tools load under the
/// bounds, and still name the field at fault.
#[tokio::test]
async fn every_builtin_schema_loads() {
    for builtin in BUILTINS {
        let tool = hands()
            .load(ToolSource::Builtin(builtin.name))
            .await
            .unwrap_or_else(|e| panic!("built-in {} was refused: {e}", builtin.name));
        assert!(!tool.info().tools.is_empty(), "{}", builtin.name);
    }
}

/// Deep input against a schema that recurses as it descends: the
/// validator's depth bound ends the call cleanly, with no stack overflow,
/// and the guest never runs.
#[tokio::test]
async fn deep_input_ends_at_the_depth_bound() {
    let tool = hands()
        .load(ToolSource::File(fixtures::SCHEMA_COSTLY.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("the costly schema passes the load bounds: {e}"));
    // Valid all the way down (the first branch matches at every level), so
    // only depth can stop it: three evaluations per level.
    let mut deep = json!([]);
    for _ in 0..120 {
        deep = json!([deep]);
    }
    let outcome = hands().call(&tool, &Grants::default(), "nest", &deep).await;
    let message = limit_message(&outcome);
    assert!(message.contains("bound of 256 levels"), "{message}");
    assert_eq!(outcome.receipt.fuel_used, 0, "the guest ran");
    assert_still_serves().await;
}
