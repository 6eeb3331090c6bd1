//! Choosing and constructing the provider `pod serve` runs with.

use std::path::PathBuf;
use std::sync::Arc;

use super::{
    anthropic, offline, openai, Anthropic, BuildError, Offline, OpenAi, OutputOptions, Provider,
    RetryPolicy, Script,
};

/// The `--provider` values.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Offline,
    Script,
    Openai,
    Anthropic,
}

/// Everything the command line, environment and config file say about the
/// model; [`build`] turns it into a provider.
#[derive(Debug, Clone, Default)]
pub struct ProviderConfig {
    /// `None`: chosen from what is configured, see [`ProviderConfig::resolve_kind`].
    pub kind: Option<ProviderKind>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub script: Option<PathBuf>,
    pub openai_api_key: Option<String>,
    pub anthropic_api_key: Option<String>,
    pub retry: RetryPolicy,
    pub output: OutputOptions,
    /// `--name`, when the pod was given one: the offline model's reply
    /// names it in the commands it suggests.
    pub pod_name: Option<String>,
}

impl ProviderConfig {
    /// The provider to use: the explicit one, else `script` when a script is
    /// given (nothing else could be meant), else `anthropic` when its key is
    /// set, else `openai` when its key or a base URL is set, else `offline`.
    pub fn resolve_kind(&self) -> ProviderKind {
        if let Some(kind) = self.kind {
            kind
        } else if self.script.is_some() {
            ProviderKind::Script
        } else if present(&self.anthropic_api_key).is_some() {
            ProviderKind::Anthropic
        } else if present(&self.openai_api_key).is_some() || self.base_url.is_some() {
            ProviderKind::Openai
        } else {
            ProviderKind::Offline
        }
    }
}

/// An empty variable (`OPENAI_API_KEY=`) counts as unset, as users mean it.
fn present(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Builds the provider `config` asks for, or says what is missing.
pub fn build(config: &ProviderConfig) -> Result<Arc<dyn Provider>, BuildError> {
    let retry = config.retry.clone();
    let model = |default: &str| config.model.clone().unwrap_or_else(|| default.to_owned());
    Ok(match config.resolve_kind() {
        ProviderKind::Offline => Arc::new(Offline {
            model: model(offline::NAME),
            pod_name: config.pod_name.clone(),
            ..Offline::default()
        }),
        ProviderKind::Script => {
            let path = config.script.as_deref().ok_or(BuildError::NoScript)?;
            let script = Script::load(path, retry).map_err(BuildError::Script)?;
            match &config.model {
                Some(name) => Arc::new(script.with_model(name.clone())),
                None => Arc::new(script),
            }
        }
        ProviderKind::Openai => {
            let key = present(&config.openai_api_key);
            if key.is_none() && config.base_url.is_none() {
                return Err(BuildError::NoOpenAiKey);
            }
            let base = config
                .base_url
                .as_deref()
                .unwrap_or(openai::DEFAULT_BASE_URL);
            Arc::new(OpenAi::new(
                model(openai::DEFAULT_MODEL),
                base,
                key,
                retry,
                &config.output,
            )?)
        }
        ProviderKind::Anthropic => {
            let key = present(&config.anthropic_api_key).ok_or(BuildError::NoAnthropicKey)?;
            let base = config
                .base_url
                .as_deref()
                .unwrap_or(anthropic::DEFAULT_BASE_URL);
            Arc::new(Anthropic::new(
                model(anthropic::DEFAULT_MODEL),
                base,
                key,
                retry,
                &config.output,
            )?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ProviderConfig {
        ProviderConfig::default()
    }

    #[test]
    fn selection_follows_the_cli_contract() {
        assert_eq!(config().resolve_kind(), ProviderKind::Offline);
        let both = ProviderConfig {
            openai_api_key: Some("o".into()),
            anthropic_api_key: Some("a".into()),
            ..config()
        };
        assert_eq!(both.resolve_kind(), ProviderKind::Anthropic);
        let base = ProviderConfig {
            base_url: Some("http://localhost:11434/v1".into()),
            anthropic_api_key: Some(" ".into()),
            ..config()
        };
        assert_eq!(base.resolve_kind(), ProviderKind::Openai);
        let explicit = ProviderConfig {
            kind: Some(ProviderKind::Offline),
            ..both
        };
        assert_eq!(explicit.resolve_kind(), ProviderKind::Offline);
    }

    #[test]
    fn missing_pieces_are_named() {
        let err = |c: ProviderConfig| build(&c).err().unwrap().to_string();
        let kind = |k| ProviderConfig {
            kind: Some(k),
            ..config()
        };
        assert!(err(kind(ProviderKind::Script)).contains("--script FILE"));
        assert!(err(kind(ProviderKind::Anthropic)).contains("ANTHROPIC_API_KEY"));
        assert!(err(kind(ProviderKind::Openai)).contains("OPENAI_API_KEY"));
    }

    #[test]
    fn models_default_per_provider_and_can_be_overridden() {
        let openai = build(&ProviderConfig {
            openai_api_key: Some("k".into()),
            ..config()
        })
        .unwrap();
        assert_eq!((openai.name(), openai.model()), ("openai", "gpt-4o"));
        let local = build(&ProviderConfig {
            base_url: Some("http://localhost:8080/v1".into()),
            model: Some("qwen".into()),
            ..config()
        })
        .unwrap();
        assert_eq!((local.name(), local.model()), ("openai", "qwen"));
        let anthropic = build(&ProviderConfig {
            anthropic_api_key: Some("k".into()),
            ..config()
        })
        .unwrap();
        assert_eq!(anthropic.model(), "claude-sonnet-4-5");
        let offline = build(&config()).unwrap();
        assert_eq!((offline.name(), offline.model()), ("offline", "offline"));
        let named = build(&ProviderConfig {
            model: Some("tiny".into()),
            ..config()
        })
        .unwrap();
        assert_eq!((named.name(), named.model()), ("offline", "tiny"));
    }
}
