//! The tool in the real host: built for wasm32-wasip2, loaded, described and
//! called through the same path as `longhand tool call`.

use longhand_hands::{CallError, Effect, Grants, Hands, HandsConfig, ToolSource, dev};
use serde_json::json;

#[tokio::test]
async fn greet_runs_in_the_real_host() -> anyhow::Result<()> {
    let wasm = dev::build_component(env!("CARGO_MANIFEST_DIR"))?;
    let hands = Hands::new(HandsConfig::default())?;
    let tool = hands.load(ToolSource::File(&wasm)).await?;

    let spec = tool.tool("greet").expect("describe lists greet");
    assert_eq!(spec.effect, Effect::ReadOnly);
    assert_eq!(spec.input_schema["required"], json!(["name"]));

    let ok = hands
        .call(&tool, &Grants::default(), "greet", &json!({"name": "Ada"}))
        .await;
    assert_eq!(ok.result, Ok(json!({"text": "Hello, Ada!"})));
    assert!(ok.receipt.fuel_used > 0);

    // The host checks the schema before the guest runs...
    let missing = hands
        .call(&tool, &Grants::default(), "greet", &json!({}))
        .await;
    assert!(
        matches!(&missing.result, Err(CallError::InvalidInput { message }) if message.contains("name")),
        "{:?}",
        missing.result
    );
    // ...and the tool's own check comes back as a value, not a trap.
    let empty = hands
        .call(&tool, &Grants::default(), "greet", &json!({"name": " "}))
        .await;
    assert_eq!(
        empty.result,
        Err(CallError::InvalidInput {
            message: "`name` is empty".to_owned()
        })
    );
    Ok(())
}
