//! What a [`Hands`] costs the process before any tool runs: the virtual
//! address space its instance pool reserves and the memory it makes
//! resident, with the default concurrency, then after one call of the
//! built-in `json` tool.
//!
//! A program, not a timed test (see docs/benchmarks.md):
//! `cargo run -p longhand-hands --example pool_cost`.

use longhand_hands::{Grants, Hands, HandsConfig, ToolSource};

/// `VmSize` and `VmRSS` of this process, in KiB, from `/proc/self/status`.
fn vm() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmSize:"), field("VmRSS:"))
}

fn show(what: &str, (size, rss): (u64, u64), (size0, rss0): (u64, u64)) {
    println!(
        "{what:<28} virtual {:>9} MiB (+{:>9} MiB)   resident {:>6} MiB (+{:>5} MiB)",
        size >> 10,
        size.saturating_sub(size0) >> 10,
        rss >> 10,
        rss.saturating_sub(rss0) >> 10,
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let before = vm();
    let config = HandsConfig::default();
    let slots = config.max_concurrent_calls;
    let hands = Hands::new(config)?;
    let built = vm();
    let tool = hands.load(ToolSource::Builtin("json")).await?;
    let input = serde_json::json!({ "filter": ".a", "input": { "a": 1 } });
    let name = tool
        .info()
        .tools
        .first()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let outcome = hands.call(&tool, &Grants::default(), &name, &input).await;
    let called = vm();
    println!("max_concurrent_calls = {slots}");
    show("process before Hands::new", before, (0, 0));
    show("after Hands::new", built, before);
    show("after loading + one call", called, before);
    println!("call: {:?}", outcome.result.map(|_| "ok"));
    Ok(())
}
