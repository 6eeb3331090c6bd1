//! The built-in offline model as a client meets it: the provider name a
//! greeting carries when a pod runs it, and the way to a real model, which
//! its replies end with and the TUI says when a conversation on it opens.

/// The offline provider's name (`greeting.provider`), and its model's
/// unless `--model` names another.
pub const PROVIDER: &str = "offline";

/// How to talk to a real model instead, `pod` being the command that
/// reaches this project's pod (`pod`, or `pod --name NAME`): the end of
/// every offline reply, and the TUI's notice on a pod that runs this model.
/// Said to every client alike — the TUI, `pod send`, a phone — so it names
/// no key of one of them: the way out is a pod started again.
pub fn real_model_hint(pod: &str) -> String {
    format!(
        "To talk to a real model, start this project's pod again with one of these, in \
         its directory (plain `{pod}` offers to restart the running pod as asked; or `{pod} \
         stop` it first):\n\
         - `ANTHROPIC_API_KEY=... {pod}` (Anthropic)\n\
         - `OPENAI_API_KEY=... {pod}` (OpenAI)\n\
         - `{pod} --base-url http://localhost:11434/v1 --model llama3.2` (Ollama, \
         llama.cpp, vLLM or any OpenAI-compatible server)\n\n\
         `--provider` and `--model` choose explicitly; docs/providers.md has the details."
    )
}
