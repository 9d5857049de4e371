# Sourced by benches/instructions.sh and release/build.sh, which both run a Claude Code hook
# as a process. `hook_fixture DIR SESSION` writes DIR/warden.toml (the built-in rules and the
# guardrails, the database in DIR) and DIR/pre.json (a PreToolUse of Bash in session SESSION,
# run in DIR).
hook_fixture() {
    mkdir -p "$1"
    printf 'builtin = true\nplugins = ["builtin:guardrails"]\ndatabase = "warden.db"\n' > "$1/warden.toml"
    printf '{"session_id":"%s","hook_event_name":"PreToolUse","cwd":"%s","tool_name":"Bash","tool_input":{"command":"cargo test --workspace 2>&1 | tail -20"}}\n' \
        "$2" "$1" > "$1/pre.json"
}
