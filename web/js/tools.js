// Generated from src/tools/registry.rs (`web_table`); a test there keeps it
// equal. Do not edit: change the tool's definition and regenerate with
//   POD_REGENERATE=1 cargo test --lib tools::registry

/** The argument a call of each built-in tool is recognised by. */
export const SUMMARY = {
  read_file: { arg: 'path' },
  list_dir: { arg: 'path' },
  glob: { search: true },
  grep: { search: true },
  write_file: { arg: 'path' },
  edit_file: { arg: 'path' },
  bash: { arg: 'command' },
  job_output: { arguments: true },
  job_kill: { arguments: true },
  update_plan: { arguments: true },
  web_fetch: { arg: 'url', url: true },
  spawn_agent: { arg: 'task' },
  wait_agents: { arguments: true },
  message_agent: { arg: 'name' },
  read_agent: { arg: 'name' },
};

/** The arguments that name what another (MCP) tool acts on, most telling first. */
export const GUESSED_KEYS = ['command', 'path', 'pattern', 'query', 'url', 'file', 'name'];
