//! [`export!`](crate::export): the one macro a tool component calls.
//!
//! The macro only assembles a `const` [`Component`](crate::Component) table
//! and a two-line `Guest` impl over it; every decision (name rules, dispatch,
//! error mapping) lives in ordinary functions where it can be read and tested.

/// Exports a Longhand tool component: metadata, tools and capability requests.
///
/// ```
/// # #[derive(serde::Deserialize, schemars::JsonSchema)]
/// # struct In {}
/// # macro_rules! tool { ($t:ident, $n:literal) => {
/// #     struct $t;
/// #     impl longhand_sdk::Tool for $t {
/// #         const NAME: &'static str = $n;
/// #         const DESCRIPTION: &'static str = "";
/// #         const EFFECT: longhand_sdk::Effect = longhand_sdk::Effect::ReadOnly;
/// #         type Input = In;
/// #         type Output = ();
/// #         fn call(_: In) -> Result<(), longhand_sdk::ToolError> { Ok(()) }
/// #     }
/// # } }
/// # tool!(Read, "read");
/// # tool!(Write, "write");
/// longhand_sdk::export! {
///     name: "fs",
///     version: "1.2.0",                 // optional: defaults to CARGO_PKG_VERSION
///     description: "Files in the workspace.",
///     tools: [Read, Write],             // types implementing `Tool`
///     requests: {                       // optional, and so is each list in it
///         dirs: [("/workspace", read_write, "the files to work on")],
///         hosts: ["api.example.com", "*.example.org:443"],
///         env: ["LANG"],
///         secrets: ["EXAMPLE_TOKEN"],
///     },
/// }
/// ```
///
/// Directory access is `read_only` or `read_write`. The lists inside
/// `requests` may be left out but, when present, come in the order shown.
/// Requests are information for the operator: nothing is granted because it
/// is requested.
///
/// Tool names are checked at compile time: an invalid or duplicate name, or an
/// empty tool list, fails the build.
///
/// ```compile_fail
/// # #[derive(serde::Deserialize, schemars::JsonSchema)]
/// # struct In {}
/// struct Shout;
/// impl longhand_sdk::Tool for Shout {
///     const NAME: &'static str = "Shout!"; // not lowercase letters, digits, `-`, `_`
///     const DESCRIPTION: &'static str = "";
///     const EFFECT: longhand_sdk::Effect = longhand_sdk::Effect::ReadOnly;
///     type Input = In;
///     type Output = ();
///     fn call(_: In) -> Result<(), longhand_sdk::ToolError> { Ok(()) }
/// }
/// longhand_sdk::export! { name: "loud", description: "", tools: [Shout] }
/// ```
///
/// The generated `call` dispatches on the tool name (an unknown name is
/// `not-found`, listing the names that exist), deserializes the input (a
/// failure is `invalid-input` naming the field), runs the tool and serializes
/// its output. Invoke the macro once per component, at module level.
#[macro_export]
macro_rules! export {
    (
        name: $name:expr,
        $(version: $version:expr,)?
        description: $description:expr,
        tools: [$($tool:ty),+ $(,)?]
        $(, requests: { $($requests:tt)* })?
        $(,)?
    ) => {
        const _: () = {
            struct __LonghandComponent;

            const COMPONENT: $crate::Component = $crate::Component::new(
                $name,
                $crate::__export_version!($($version)?),
                $description,
                &[$($crate::ToolEntry::of::<$tool>()),+],
                $crate::__export_requests!($($($requests)*)?),
            );

            impl $crate::bindings::exports::longhand::tool::tools::Guest for __LonghandComponent {
                fn describe() -> $crate::bindings::longhand::tool::types::ComponentInfo {
                    COMPONENT.describe()
                }

                fn call(
                    name: ::std::string::String,
                    input: ::std::string::String,
                ) -> ::core::result::Result<
                    ::std::string::String,
                    $crate::bindings::longhand::tool::types::ToolError,
                > {
                    COMPONENT
                        .call(&name, &input)
                        .map_err(::core::convert::Into::into)
                }
            }

            // The exported symbols carry component-model names (with `:`
            // and `#`) that native linkers reject in a cdylib's version
            // script, so they exist only in the wasm build; natively the
            // crate still compiles and its tools can be unit-tested.
            #[cfg(target_family = "wasm")]
            $crate::bindings::export!(__LonghandComponent with_types_in $crate::bindings);
            // Natively, keep the entry points alive for the dead-code lint.
            #[cfg(not(target_family = "wasm"))]
            const _: [fn(); 2] = [
                || {
                    let _ = <__LonghandComponent as $crate::bindings::exports::longhand::tool::tools::Guest>::describe();
                },
                || {
                    let _ = <__LonghandComponent as $crate::bindings::exports::longhand::tool::tools::Guest>::call(
                        ::std::string::String::new(),
                        ::std::string::String::new(),
                    );
                },
            ];
        };
    };
}

/// The component version: as given, or the calling crate's
/// `CARGO_PKG_VERSION` (`env!` expands where the macro is invoked).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_version {
    () => {
        ::core::env!("CARGO_PKG_VERSION")
    };
    ($version:expr) => {
        $version
    };
}

/// Builds a [`Requests`](crate::Requests) from the `requests: { .. }` block.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_requests {
    (
        $(dirs: [$(($guest:expr, $access:ident, $why:expr)),* $(,)?] $(,)?)?
        $(hosts: [$($host:expr),* $(,)?] $(,)?)?
        $(env: [$($env:expr),* $(,)?] $(,)?)?
        $(secrets: [$($secret:expr),* $(,)?] $(,)?)?
    ) => {
        $crate::Requests {
            dirs: &[$($(
                $crate::DirRequest {
                    guest_path: $guest,
                    access: $crate::__export_dir_access!($access),
                    why: $why,
                }
            ),*)?],
            hosts: &[$($($host),*)?],
            env: &[$($($env),*)?],
            secrets: &[$($($secret),*)?],
        }
    };
}

/// Maps `read_only` / `read_write` to [`DirAccess`](crate::DirAccess).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_dir_access {
    (read_only) => {
        $crate::DirAccess::ReadOnly
    };
    (read_write) => {
        $crate::DirAccess::ReadWrite
    };
    ($other:ident) => {
        ::core::compile_error!(::core::concat!(
            "unknown directory access `",
            ::core::stringify!($other),
            "`: use read_only or read_write"
        ))
    };
}
