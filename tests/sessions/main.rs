//! Sessions: a model's turns calling tools, tasks and agents, told scenario by scenario; progress
//! reports in the feed; the OpenAI-compatible model; `host chat` through a pipe; and a session
//! killed mid-turn by SIGKILL.

mod agents;
mod chat;
mod crash;
mod feed;
mod openai;
mod progress;
mod scenarios;
