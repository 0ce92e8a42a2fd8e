//! What `tool describe` prints for people about a loaded component, shared
//! by `describe` and `install` (which shows what it just installed).
//! Everything in it is the component's own text: printed through
//! [`term`](super::term), one line per item, never raw.

use super::term::one_line;
use longhand_hands::LoadedTool;

/// What `describe` prints for people: the component, its digest and
/// imports, what it asks for, and its tools (also what `install` shows).
pub(super) fn print_description(tool: &LoadedTool) {
    let info = tool.info();
    // One line per item: a guest's newline must not print a line of its
    // own (a forged `digest:` or `asks for` line).
    println!(
        "{} {} — {}",
        one_line(&info.name),
        one_line(&info.version),
        one_line(first_line(&info.description))
    );
    if info.description.trim_end().contains('\n') {
        for line in info.description.trim_end().lines().skip(1) {
            println!("    {}", one_line(line));
        }
    }
    println!("digest:  {}", tool.digest());
    println!("imports: {}", tool.capabilities().join(", "));
    let req = &info.requests;
    println!("asks for (nothing is granted unless you grant it):");
    if req.dirs.is_empty() && req.hosts.is_empty() && req.env.is_empty() && req.secrets.is_empty() {
        println!("  nothing");
    }
    for d in &req.dirs {
        let access = match d.access {
            longhand_hands::Access::ReadOnly => "ro",
            longhand_hands::Access::ReadWrite => "rw",
        };
        println!(
            "  dir    {} ({access}): {}",
            one_line(&d.guest_path),
            one_line(&d.why)
        );
    }
    for h in &req.hosts {
        println!("  host   {}", one_line(h));
    }
    for e in &req.env {
        println!("  env    {}", one_line(e));
    }
    for s in &req.secrets {
        println!("  secret {}", one_line(s));
    }
    if let Some(derived) = &info.derived {
        println!(
            "derived: it exports no longhand:tool world; each exported function below is a \
             tool, its input derived from the WIT types. Effect: writes unless agent.toml's \
             `effects` says otherwise."
        );
        for d in &derived.tools {
            println!(
                "  {} <- {}: {}",
                one_line(&d.tool),
                one_line(&d.export),
                one_line(&d.signature)
            );
        }
        for s in &derived.skipped {
            println!("  skipped {}: {}", one_line(&s.export), one_line(&s.reason));
        }
    }
    println!("tools:");
    for t in &info.tools {
        println!(
            "  {} ({:?}): {}",
            one_line(&t.name),
            t.effect,
            one_line(first_line(&t.description))
        );
        if let Some(props) = t.input_schema.get("properties").and_then(|p| p.as_object()) {
            let required: Vec<&str> = t
                .input_schema
                .get("required")
                .and_then(|r| r.as_array())
                .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            for (name, schema) in props {
                let ty = schema
                    .get("type")
                    .map(|t| match t {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| "any".to_owned());
                let req = if required.contains(&name.as_str()) {
                    ", required"
                } else {
                    ""
                };
                let desc = schema
                    .get("description")
                    .and_then(|d| d.as_str())
                    .unwrap_or("");
                println!(
                    "      {} ({}{req}) {}",
                    one_line(name),
                    one_line(&ty),
                    one_line(first_line(desc))
                );
            }
        }
    }
}

/// The first line of `text`.
pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
