//! The config file: `--config FILE` (`POD_CONFIG`), else
//! `$XDG_CONFIG_HOME/pod/config.toml`.
//!
//! Its top-level scalar keys are flag defaults (installed into clap by
//! [`super::args::with_config_file`]); its tables are typed here:
//! `[mcp_servers.NAME]`, `[permissions]`, `[workspaces."<path>".permissions]`
//! and `[[hooks]]`. The file must be found before
//! clap parses the command line, because its values become clap's defaults,
//! so [`ConfigFile::locate`] pre-scans argv and the environment for
//! `--config` itself.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::approval::Rule;
use crate::hooks::{Hooks, RawHook};
use crate::mcp::McpServerConfig;

/// The parsed config file. An absent default file is an empty one.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// Where it was read from; `None` when there was none.
    pub path: Option<PathBuf>,
    /// Where an `always` answer writes its rule: the file read, else the
    /// default file (created then); `None` without a config directory.
    pub write_path: Option<PathBuf>,
    /// The whole file, for the flag defaults.
    pub table: toml::Table,
    /// `[mcp_servers.NAME]`: the MCP servers the pod keeps running.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `[permissions]`: approval rules, combined with `--allow` / `--deny`.
    pub permissions: Permissions,
    /// `[workspaces."<path>".permissions]`: rules for one workspace, by its
    /// path as written (see [`ConfigFile::permissions_for`]).
    pub workspaces: BTreeMap<String, Permissions>,
    /// Warnings about the file (keys that set nothing), which the pod
    /// repeats to its clients.
    pub warnings: Vec<String>,
    /// `[[hooks]]`, in file order.
    pub hooks: Hooks,
}

/// `[permissions]` `allow = [...]`, `deny = [...]`: rules as `TOOL:PATTERN`,
/// checked when the file is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

/// `[permissions]` as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPermissions {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

fn rules(list: Vec<String>, key: &str) -> Result<Vec<Rule>, String> {
    list.iter()
        .map(|text| {
            text.parse::<Rule>()
                .map_err(|e| format!("[permissions] {key}: {e}"))
        })
        .collect()
}

impl RawPermissions {
    fn check(self, table: &str) -> Result<Permissions, String> {
        let rules = |list: Vec<String>, key: &str| {
            rules(list, key).map_err(|e| e.replacen("[permissions]", table, 1))
        };
        Ok(Permissions {
            allow: rules(self.allow, "allow")?,
            deny: rules(self.deny, "deny")?,
        })
    }
}

/// `[workspaces."<path>"]` as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    #[serde(default)]
    permissions: RawPermissions,
}

/// The typed tables; everything else in the file is a flag default.
#[derive(Deserialize)]
struct Tables {
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerConfig>,
    #[serde(default)]
    permissions: RawPermissions,
    #[serde(default)]
    workspaces: BTreeMap<String, RawWorkspace>,
    /// Read one by one, so that an error names its table.
    #[serde(default)]
    hooks: Vec<toml::Table>,
}

/// Where the config file is, and whether the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `--config FILE` or `POD_CONFIG`: it must exist.
    Named(PathBuf),
    /// `$XDG_CONFIG_HOME/pod/config.toml`: optional.
    Default(PathBuf),
    /// No config directory at all.
    None,
}

impl ConfigFile {
    /// Finds the file from argv (`--config FILE` / `--config=FILE`, before
    /// any `--`), then `POD_CONFIG`, then the default path: the flag beats
    /// the environment, as for every other setting.
    pub fn locate(args: &[OsString], env: Option<OsString>) -> Location {
        let mut args = args.iter().skip(1);
        let mut named = None;
        while let Some(arg) = args.next() {
            let Some(text) = arg.to_str() else { continue };
            if text == "--" {
                break;
            }
            if text == "--config" {
                named = args.next().cloned();
            } else if let Some(value) = text.strip_prefix("--config=") {
                named = Some(value.into());
            }
        }
        if let Some(path) = named.or(env).filter(|p| !p.is_empty()) {
            return Location::Named(path.into());
        }
        match dirs::config_dir() {
            Some(dir) => Location::Default(dir.join("pod").join("config.toml")),
            None => Location::None,
        }
    }

    /// Reads and parses the file. A missing default file is an empty
    /// config; a missing named file, or any file that does not parse, is an
    /// error naming the file.
    pub fn load(location: &Location) -> Result<ConfigFile, String> {
        let (path, required) = match location {
            Location::Named(path) => (path, true),
            Location::Default(path) => (path, false),
            Location::None => return Ok(ConfigFile::default()),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ConfigFile {
                    write_path: Some(path.clone()),
                    ..ConfigFile::default()
                })
            }
            Err(e) => return Err(format!("cannot read config file {}: {e}", path.display())),
        };
        Self::parse(&text, path).map_err(|e| format!("config file {}: {e}", path.display()))
    }

    /// The rules of `[permissions]` and of the `[workspaces."<path>"]`
    /// tables naming `workspace` (by its path as written, or as it resolves).
    pub fn permissions_for(&self, workspace: &Path) -> Permissions {
        let mut all = self.permissions.clone();
        for (key, permissions) in &self.workspaces {
            let named = Path::new(key);
            let same = named == workspace
                || std::fs::canonicalize(named).is_ok_and(|real| real == workspace);
            if same {
                all.allow.extend(permissions.allow.iter().cloned());
                all.deny.extend(permissions.deny.iter().cloned());
            }
        }
        all
    }

    /// Parses the file's text; `path` is only remembered, for messages.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let tables: Tables = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())?;
        crate::mcp::check_names(&tables.mcp_servers)?;
        let mut workspaces = BTreeMap::new();
        for (key, raw) in tables.workspaces {
            let checked = raw
                .permissions
                .check(&format!("[workspaces.{key:?}.permissions]"))?;
            workspaces.insert(key, checked);
        }
        Ok(ConfigFile {
            path: Some(path.to_owned()),
            write_path: Some(path.to_owned()),
            table,
            mcp_servers: tables.mcp_servers,
            permissions: tables.permissions.check("[permissions]")?,
            workspaces,
            hooks: Hooks::parse(raw_hooks(tables.hooks)?)?,
            warnings: Vec::new(),
        })
    }
}

/// The `[[hooks]]` tables as written; an error names the table (counted
/// from 1), as [`Hooks::parse`]'s do.
fn raw_hooks(tables: Vec<toml::Table>) -> Result<Vec<RawHook>, String> {
    tables
        .into_iter()
        .enumerate()
        .map(|(index, table)| {
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| format!("[[hooks]] #{}: {}", index + 1, e.message()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_hook_key_names_its_table() {
        let text = "[[hooks]]\nevent = \"turn_end\"\ncommand = \"true\"\n\
                    [[hooks]]\nevent = \"pre_tool_use\"\nmatchr = \"bash:*\"\ncommand = \"true\"\n";
        let error = ConfigFile::parse(text, Path::new("c.toml")).unwrap_err();
        assert!(
            error.starts_with("[[hooks]] #2: unknown field `matchr`"),
            "{error}"
        );
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_flag_beats_the_environment_and_both_beat_the_default() {
        let env = Some(OsString::from("/env.toml"));
        assert_eq!(
            ConfigFile::locate(&args(&["pod", "serve", "--config", "/a.toml"]), env.clone()),
            Location::Named("/a.toml".into())
        );
        assert_eq!(
            ConfigFile::locate(&args(&["pod", "--config=/b.toml", "status"]), env.clone()),
            Location::Named("/b.toml".into())
        );
        assert_eq!(
            ConfigFile::locate(&args(&["pod", "status"]), env),
            Location::Named("/env.toml".into())
        );
        assert!(matches!(
            ConfigFile::locate(&args(&["pod", "--", "--config", "/c.toml"]), None),
            Location::Default(_) | Location::None
        ));
    }

    #[test]
    fn tables_are_typed_and_scalars_kept_for_flags() {
        let text = r#"
            max_steps = 3
            [mcp_servers.fs]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
            env = { DEBUG = "1" }
            timeout_s = 30
            [mcp_servers.git]
            command = "uvx"
            [permissions]
            allow = ["mcp__git__*:*"]
            deny = ["bash:rm *"]
        "#;
        let config = ConfigFile::parse(text, Path::new("/x.toml")).unwrap();
        assert_eq!(config.table["max_steps"].as_integer(), Some(3));
        let fs = &config.mcp_servers["fs"];
        assert_eq!(fs.command, "npx");
        assert_eq!(fs.args.len(), 3);
        assert_eq!(fs.env["DEBUG"], "1");
        assert_eq!(fs.timeout_s, 30);
        assert_eq!(config.mcp_servers["git"].timeout_s, 120);
        let text = |rules: &[Rule]| rules.iter().map(Rule::to_string).collect::<Vec<_>>();
        assert_eq!(text(&config.permissions.allow), ["mcp__git__*:*"]);
        assert_eq!(text(&config.permissions.deny), ["bash:rm *"]);
        let bad = ConfigFile::parse("[permissions]\nallow = [\"bash:\"]\n", Path::new("/x"));
        assert!(bad.unwrap_err().contains("[permissions] allow"));
    }

    #[test]
    fn workspace_tables_add_their_rules_for_that_workspace_only() {
        let text = r#"
            [permissions]
            allow = ["bash:ls *"]
            [workspaces."/w/one".permissions]
            allow = ["write:src/**"]
            [workspaces."/w/two".permissions]
            deny = ["read:secrets/**"]
        "#;
        let config = ConfigFile::parse(text, Path::new("/x.toml")).unwrap();
        let texts = |rules: &[Rule]| rules.iter().map(Rule::to_string).collect::<Vec<_>>();
        let one = config.permissions_for(Path::new("/w/one"));
        assert_eq!(texts(&one.allow), ["bash:ls *", "write:src/**"]);
        assert!(one.deny.is_empty());
        let two = config.permissions_for(Path::new("/w/two"));
        assert_eq!(texts(&two.deny), ["read:secrets/**"]);
        let bad = ConfigFile::parse(
            "[workspaces.\"/w\".permissions]\nallow = [\"write:/etc\"]\n",
            Path::new("/x"),
        );
        assert!(
            bad.unwrap_err()
                .contains("[workspaces.\"/w\".permissions] allow"),
            "names the table"
        );
    }

    #[test]
    fn mistakes_are_reported_with_where_they_are() {
        let missing = ConfigFile::parse("[mcp_servers.fs]\nargs = []\n", Path::new("/x"));
        assert!(missing.unwrap_err().contains("command"));
        let typo = ConfigFile::parse(
            "[mcp_servers.fs]\ncommand = \"x\"\narg = []\n",
            Path::new("/x"),
        );
        assert!(typo.unwrap_err().contains("arg"));
        let clash = ConfigFile::parse(
            "[mcp_servers.\"a.b\"]\ncommand = \"x\"\n[mcp_servers.a_b]\ncommand = \"y\"\n",
            Path::new("/x"),
        );
        assert!(clash.unwrap_err().contains("mcp__a_b__"));
    }

    #[test]
    fn a_missing_default_file_is_empty_but_a_named_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("none.toml");
        let empty = ConfigFile::load(&Location::Default(absent.clone())).unwrap();
        assert!(empty.mcp_servers.is_empty() && empty.path.is_none());
        let err = ConfigFile::load(&Location::Named(absent)).unwrap_err();
        assert!(err.contains("none.toml"), "{err}");
    }
}
