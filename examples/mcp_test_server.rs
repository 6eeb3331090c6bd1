//! A small MCP server on stdio, built on `rmcp`'s server side, for pod's
//! MCP tests (`tests/mcp.rs`): `cargo test` builds it, so CI needs nothing
//! else.
//!
//! Tools: `echo` (its text back), `add`, `fail` (an `isError` result),
//! `slow` (sleeps; a cancellation ends it early and is recorded), `pid` (its
//! process id), `image` (an image next to text), and `grow`, which adds the
//! tool `extra` and sends `notifications/tools/list_changed`.
//!
//! Environment: `MCP_TEST_PID_FILE` — each start appends its pid there;
//! `MCP_TEST_CHILD_PID_FILE` — each start also starts a `sleep` child (as
//! servers run by `npx` have children) and appends its pid there;
//! `MCP_TEST_SLOW_FILE` — each `slow` call appends `started` when it begins
//! and `cancelled` when a cancellation ends it; `MCP_TEST_LINGER` — keep
//! running after stdin closes, as a badly behaved server would.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A developer's tool: a panic is its error report.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};

#[derive(Clone, Default)]
struct TestServer {
    grown: Arc<AtomicBool>,
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("schemas are written as objects")
    };
    Tool::new(name, description, Arc::new(schema))
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool(
                "echo",
                "Returns its text unchanged.",
                object(json!({"text": {"type": "string"}}), &["text"]),
            ),
            tool(
                "add",
                "Adds two numbers.",
                object(
                    json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
            tool(
                "fail",
                "Always fails with its message.",
                object(json!({"message": {"type": "string"}}), &["message"]),
            ),
            tool(
                "slow",
                "Sleeps for the given seconds; stops early when cancelled.",
                object(json!({"seconds": {"type": "number"}}), &["seconds"]),
            ),
            tool("pid", "The server's process id.", object(json!({}), &[])),
            tool("image", "A caption and a tiny PNG.", object(json!({}), &[])),
            tool("grow", "Adds the tool `extra`.", object(json!({}), &[])),
            tool(
                "huge",
                "Returns a text of the given number of bytes.",
                object(json!({"bytes": {"type": "number"}}), &["bytes"]),
            ),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool(
                "extra",
                "Exists after `grow`.",
                object(json!({}), &[]),
            ));
        }
        tools
    }
}

fn text(text: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
}

fn arg<'a>(args: &'a Option<JsonObject>, name: &str) -> Result<&'a Value, ErrorData> {
    args.as_ref()
        .and_then(|a| a.get(name))
        .ok_or_else(|| ErrorData::invalid_params(format!("missing argument {name}"), None))
}

fn number(args: &Option<JsonObject>, name: &str) -> Result<f64, ErrorData> {
    arg(args, name)?
        .as_f64()
        .ok_or_else(|| ErrorData::invalid_params(format!("{name} must be a number"), None))
}

fn append_line(variable: &str, line: &str) {
    if let Some(path) = std::env::var_os(variable) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the marker file can be opened");
        writeln!(file, "{line}").expect("the marker file can be written");
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = &request.arguments;
        match request.name.as_ref() {
            "echo" => match arg(args, "text")?.as_str() {
                Some(s) => text(s),
                None => Err(ErrorData::invalid_params("text must be a string", None)),
            },
            "add" => text((number(args, "a")? + number(args, "b")?).to_string()),
            "fail" => {
                let message = arg(args, "message")?.as_str().unwrap_or("failed");
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
            "slow" => {
                let seconds = number(args, "seconds")?;
                append_line("MCP_TEST_SLOW_FILE", "started");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                        text(format!("slept {seconds} s"))
                    }
                    _ = context.ct.cancelled() => {
                        append_line("MCP_TEST_SLOW_FILE", "cancelled");
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "pid" => text(std::process::id().to_string()),
            "huge" => text("x".repeat(number(args, "bytes")? as usize)),
            "image" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a red dot:"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ])
            .into()),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                context
                    .peer
                    .notify_tool_list_changed()
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                text("grown")
            }
            "extra" if self.grown.load(Ordering::SeqCst) => text("extra"),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    append_line("MCP_TEST_PID_FILE", &std::process::id().to_string());
    if std::env::var_os("MCP_TEST_CHILD_PID_FILE").is_some() {
        let child = std::process::Command::new("sleep").arg("600").spawn()?;
        append_line("MCP_TEST_CHILD_PID_FILE", &child.id().to_string());
    }
    let service = TestServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    if std::env::var_os("MCP_TEST_LINGER").is_some() {
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
    Ok(())
}
