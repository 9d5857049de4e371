//! How a failed run is told: the script's own frames of a traceback, the message of an error
//! raised in a host function, and which errors are Lua's own stack overflows.

/// The frames of a traceback that belong to scripts (not Warden's prelude or the C calls that
/// run them), under a `stack traceback:` header; empty when none is left.
pub(crate) fn script_frames(traceback: &str) -> String {
    let frames: Vec<&str> = traceback
        .lines()
        .skip(1)
        .filter(|l| {
            let l = l.trim();
            !l.starts_with("warden-prelude:")
                && !l.starts_with("[C]: in function 'xpcall'")
                && !l.starts_with("[C]: in function 'error'")
                && !l.starts_with("[C]: in upvalue ")
                && l != "(...tail calls...)"
                && !l.is_empty()
        })
        .collect();
    if frames.is_empty() {
        return String::new();
    }
    format!("\nstack traceback:\n{}", frames.join("\n"))
}

/// The message of an error raised in a host function, without the layers (and tracebacks)
/// mlua wraps it in on the way out.
pub(crate) fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(message) => message.clone(),
        other => describe_error(other),
    }
}

pub(crate) fn describe_error(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::CallbackError { cause, traceback } => {
            format!("{}\n{traceback}", describe_error(cause))
        }
        mlua::Error::MemoryError(_) => {
            "stopped: the script ran out of memory (the session's Lua memory limit)".into()
        }
        other => other.to_string(),
    }
}

/// Whether an error is Lua's own stack overflow (of its stack, or of nested C calls).
pub(crate) fn is_stack_overflow(error: &str) -> bool {
    !error.starts_with("stopped:")
        && error
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("stack overflow") || l.contains("stack overflow ("))
}
