//! The metrics of models: calls by model and how they ended, how long they took, and the tokens
//! they used. Recorded once metrics are enabled ([`eve_runtime::metrics::enable`]).
//!
//! | name | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `eve_model_calls_total` | counter | `model`, `outcome` | a session's model calls (one a model step's attempt): `ok` or `error` |
//! | `eve_model_call_duration_seconds` | histogram | `model` | how long each took, tools the model called in it included |
//! | `eve_model_tokens_total` | counter | `model`, `kind` | tokens the provider counted: `input` (the prompt) and `output` (the answer), from models that report them ([`OpenAiModel`](crate::openai::OpenAiModel) does) |
//!
//! `model` is the model's [`name`](crate::Model::name): one per configured model, never a
//! session's or a run's id.

use std::time::Duration;

use eve_runtime::metrics::{Metric, enabled};

/// `eve_model_calls_total`.
pub const MODEL_CALLS: &str = "eve_model_calls_total";
/// `eve_model_call_duration_seconds`.
pub const MODEL_CALL_DURATION: &str = "eve_model_call_duration_seconds";
/// `eve_model_tokens_total`.
pub const MODEL_TOKENS: &str = "eve_model_tokens_total";

inventory::submit! { Metric::counter(MODEL_CALLS, "Model calls of sessions, by model and outcome.") }
inventory::submit! { Metric::histogram(MODEL_CALL_DURATION, "How long model calls took, by model.") }
inventory::submit! { Metric::counter(MODEL_TOKENS, "Tokens models used, by model and kind (input, output).") }

/// Counts and times a call of `model` that ended `ok` or not.
pub(crate) fn model_called(model: &str, ok: bool, took: Duration) {
    if enabled() {
        let outcome = if ok { "ok" } else { "error" };
        ::metrics::counter!(MODEL_CALLS, "model" => model.to_owned(), "outcome" => outcome).increment(1);
        ::metrics::histogram!(MODEL_CALL_DURATION, "model" => model.to_owned()).record(took);
    }
}

/// Counts the tokens a provider reported for one answer of `model`.
#[cfg(feature = "openai")]
pub(crate) fn tokens_used(model: &str, input: u64, output: u64) {
    if enabled() {
        ::metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "kind" => "input").increment(input);
        ::metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "kind" => "output").increment(output);
    }
}
