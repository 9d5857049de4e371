//! Token usage from a Claude Code transcript: the usage of its last model call, read from the
//! end of the file, so a transcript of 100 MB costs what a small one does.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The usage of one model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The API message id (a new one means a new model call).
    pub message_id: String,
    /// The model.
    pub model: String,
    /// Tokens of input not read from the cache.
    pub input: u64,
    /// Tokens written to the cache.
    pub cache_creation: u64,
    /// Tokens read from the cache.
    pub cache_read: u64,
    /// Tokens of output.
    pub output: u64,
    /// The model's context window, when the agent reports it (Codex does).
    pub window: Option<u64>,
}

impl Usage {
    /// Everything in the context after this call: its input (however it was cached) and its
    /// output.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.cache_creation)
            .saturating_add(self.cache_read)
            .saturating_add(self.output)
    }
}

/// How much of a transcript's end is read, at most, looking for the last model call.
const MAX_TAIL: u64 = 8 << 20;
/// The size of each read, backwards from the end.
const BLOCK: u64 = 64 << 10;

/// The usage of the last model call of the main conversation in the transcript at `path`
/// (subagents' calls are left out), or `None` when there is none in its last 8 MiB. Only a
/// regular file is read; the open does not block (a FIFO named as the transcript cannot stall
/// the hook).
pub fn last_usage(path: &Path) -> io::Result<Option<Usage>> {
    let (file, len) = open(path)?;
    Ok(scan(&file, len, |line| usage_of(line, None)))
}

/// The usage of the model call of the main conversation that asked for the tool call
/// `tool_use_id`, or `None` while the transcript's last 8 MiB do not hold it yet (Claude Code
/// writes its transcript a little after the hooks of the call run).
pub fn usage_of_call(path: &Path, tool_use_id: &str) -> io::Result<Option<Usage>> {
    let (file, len) = open(path)?;
    Ok(scan(&file, len, |line| usage_of(line, Some(tool_use_id))))
}

/// Opens a transcript: a regular file only, without blocking (a FIFO named as the transcript
/// cannot stall the hook) and without following a link; with its length.
pub(crate) fn open(path: &Path) -> io::Result<(File, u64)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the transcript is not a regular file",
        ));
    }
    Ok((file, meta.len()))
}

/// Scans `file` (of `len` bytes) backwards, line by line, for the first line `found` accepts.
pub(crate) fn scan<T>(file: &File, len: u64, found: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
    let floor = len.saturating_sub(MAX_TAIL);
    let mut end = len;
    // Bytes of a line cut by the block boundary, carried to the next (earlier) block.
    let mut carry: Vec<u8> = Vec::new();
    while end > floor {
        let start = end.saturating_sub(BLOCK).max(floor);
        let mut block = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut block, start).ok()?;
        block.extend_from_slice(&carry);
        let mut lines: Vec<&[u8]> = block.split(|&b| b == b'\n').collect();
        // The first piece may be the end of a line that starts in the block before.
        let first = if start > floor {
            lines.remove(0)
        } else {
            &[][..]
        };
        for line in lines.iter().rev() {
            if let Some(u) = found(line) {
                return Some(u);
            }
        }
        carry = first.to_vec();
        if start == floor {
            return found(&carry);
        }
        end = start;
    }
    None
}

/// The usage of `line` when it is a model call of the main conversation (that asked for the
/// tool call `tool_use`, when given).
fn usage_of(line: &[u8], tool_use: Option<&str>) -> Option<Usage> {
    // Cheap tests before parsing: most lines are not model calls.
    let has = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
    if line.is_empty() || !has(b"\"usage\"") || !has(b"assistant") {
        return None;
    }
    if tool_use.is_some_and(|id| !has(id.as_bytes())) {
        return None;
    }
    let v: Line = serde_json::from_slice(line).ok()?;
    if v.kind.as_deref() != Some("assistant") || v.sidechain == Some(true) {
        return None;
    }
    let m = v.message?;
    if let Some(id) = tool_use {
        let Some(Value::Array(blocks)) = &m.content else {
            return None;
        };
        let asked = blocks.iter().any(|block| {
            block.get("type").and_then(Value::as_str) == Some("tool_use")
                && block.get("id").and_then(Value::as_str) == Some(id)
        });
        if !asked {
            return None;
        }
    }
    m.usage()
}

/// The fields of a transcript line Warden reads (the live hook's usage, a backtest's events);
/// the others are passed over unbuilt.
#[derive(Deserialize)]
pub(crate) struct Line {
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    #[serde(rename = "isSidechain")]
    pub(crate) sidechain: Option<bool>,
    #[serde(rename = "isMeta")]
    pub(crate) meta: Option<bool>,
    /// A summary Claude Code wrote when it compacted the conversation: not a prompt.
    #[serde(rename = "isCompactSummary")]
    pub(crate) compact_summary: Option<bool>,
    #[serde(rename = "isVisibleInTranscriptOnly")]
    pub(crate) transcript_only: Option<bool>,
    pub(crate) cwd: Option<String>,
    pub(crate) message: Option<Message>,
    #[serde(rename = "toolUseResult")]
    pub(crate) tool_use_result: Option<Value>,
}

/// A line's `message`: a model call's (`assistant`), or the user's side (`user`).
#[derive(Deserialize)]
pub(crate) struct Message {
    pub(crate) id: Option<String>,
    pub(crate) model: Option<String>,
    /// Text, or an array of blocks (`text`, `tool_use`, `tool_result`...).
    pub(crate) content: Option<Value>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) usage: Option<Tokens>,
}

/// A model call's `usage`.
#[derive(Deserialize)]
pub(crate) struct Tokens {
    #[serde(default, deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    output_tokens: Option<u64>,
}

/// A token count: a whole number, or nothing (any other value counts as none, as a count the
/// transcript writes otherwise does not stop the rest of the call being read).
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(d)?.as_u64())
}

impl Message {
    /// The call's usage, if the message has one.
    pub(crate) fn usage(&self) -> Option<Usage> {
        let u = self.usage.as_ref()?;
        Some(Usage {
            message_id: self.id.clone().unwrap_or_default(),
            model: self.model.clone().unwrap_or_default(),
            input: u.input_tokens.unwrap_or(0),
            cache_creation: u.cache_creation_input_tokens.unwrap_or(0),
            cache_read: u.cache_read_input_tokens.unwrap_or(0),
            output: u.output_tokens.unwrap_or(0),
            window: None,
        })
    }
}

/// The context windows Warden knows, by model id prefix. Longer prefixes win; an operator's
/// `[claude_code.context_windows]` comes first.
const MODELS: &[(&str, u64)] = &[
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-3-5-sonnet", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("claude-3", 200_000),
    // Codex's models (Codex reports its window in its session file; this is for the first call).
    ("gpt-5", 272_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
];

/// The window of a model Warden does not know.
pub const DEFAULT_WINDOW: u64 = 200_000;

/// The context window of `model`: the operator's entry that is the longest prefix of it, else
/// Warden's, else [`DEFAULT_WINDOW`].
pub fn context_window(model: &str, configured: &[(String, u64)]) -> u64 {
    let best = |table: &mut dyn Iterator<Item = (&str, u64)>| {
        table
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, w)| w)
    };
    best(&mut configured.iter().map(|(p, w)| (p.as_str(), *w)))
        .or_else(|| best(&mut MODELS.iter().copied()))
        .unwrap_or(DEFAULT_WINDOW)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn line(id: &str, input: u64, sidechain: bool) -> String {
        format!(
            "{{\"type\":\"assistant\",\"isSidechain\":{sidechain},\"message\":{{\"id\":\"{id}\",\"model\":\"claude-sonnet-4-5-20250929\",\"role\":\"assistant\",\"usage\":{{\"input_tokens\":{input},\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":1000,\"output_tokens\":10}}}}}}\n"
        )
    }

    #[test]
    fn the_last_main_model_call_is_found_from_the_end() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(line("msg_1", 5, false).as_bytes()).unwrap();
        // Lines longer than a block, and a subagent's call after the main one.
        let filler = format!(
            "{{\"type\":\"user\",\"text\":\"{}\"}}\n",
            "x".repeat(200_000)
        );
        f.write_all(filler.as_bytes()).unwrap();
        f.write_all(line("msg_2", 7, false).as_bytes()).unwrap();
        f.write_all(filler.as_bytes()).unwrap();
        f.write_all(line("msg_sub", 9, true).as_bytes()).unwrap();
        f.flush().unwrap();
        let u = last_usage(f.path()).unwrap().unwrap();
        assert_eq!(u.message_id, "msg_2");
        assert_eq!(u.total(), 7 + 100 + 1000 + 10);
    }

    #[test]
    fn the_model_call_of_a_tool_call_is_found_by_its_tool_use_id() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let call = |id: &str, tool: &str, input: u64| {
            format!(
                "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"m\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"{tool}\",\"name\":\"Bash\",\"input\":{{}}}}],\"usage\":{{\"input_tokens\":{input},\"output_tokens\":1}}}}}}\n"
            )
        };
        f.write_all(call("msg_1", "toolu_a", 10).as_bytes())
            .unwrap();
        // The result of the call names its id too, and is not a model call.
        f.write_all(b"{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_a\"}]}}\n").unwrap();
        f.write_all(call("msg_2", "toolu_b", 20).as_bytes())
            .unwrap();
        f.flush().unwrap();
        let a = usage_of_call(f.path(), "toolu_a").unwrap().unwrap();
        assert_eq!((a.message_id.as_str(), a.input), ("msg_1", 10));
        let b = usage_of_call(f.path(), "toolu_b").unwrap().unwrap();
        assert_eq!(b.message_id, "msg_2");
        assert_eq!(
            usage_of_call(f.path(), "toolu_c").unwrap(),
            None,
            "not written yet"
        );
    }

    #[test]
    fn a_transcript_without_calls_or_not_a_file_gives_nothing() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"{\"type\":\"user\"}\nnot json\n").unwrap();
        assert_eq!(last_usage(f.path()).unwrap(), None);
        assert!(last_usage(Path::new("/")).is_err());
        assert!(last_usage(Path::new("/nonexistent/t.jsonl")).is_err());
    }

    #[test]
    fn context_windows_by_longest_prefix_operators_first() {
        let configured = vec![("claude-sonnet-4-5".to_string(), 1_000_000)];
        assert_eq!(
            context_window("claude-sonnet-4-5-20250929", &configured),
            1_000_000
        );
        assert_eq!(
            context_window("claude-sonnet-4-20250514", &configured),
            200_000
        );
        assert_eq!(context_window("some-other-model", &[]), DEFAULT_WINDOW);
    }
}
