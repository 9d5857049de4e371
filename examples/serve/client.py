"""An agent loop's side of `warden serve`, with Python's standard library only.

    python3 examples/serve/client.py [URL]

URL defaults to http://127.0.0.1:7878; set WARDEN_TOKEN when the server has a token. The
server here runs the built-in rules and the example plugins (see "Warden as a service").
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7878"
TOKEN = os.environ.get("WARDEN_TOKEN")


def call(method, path, body=None):
    """One request; the status and the JSON answer (every error is JSON too)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    if TOKEN:
        request.add_header("authorization", "Bearer " + TOKEN)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.load(answer) if answer.status != 204 else None
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def report(session, event):
    """Reports one hook of the agent loop; the supervisor's outcome."""
    status, outcome = call("POST", f"/v1/sessions/{session}/events", event)
    if status != 200:
        raise RuntimeError(f"{status}: {outcome['error']}")
    return outcome


session = "py-demo"
report(session, {"hook": "on_query_start", "query": "Research and compare SQLite's WAL modes"})

# Before each turn: inject what the supervisor has to say.
outcome = report(session, {"hook": "on_turn_start", "turn": {"number": 1, "token_usage": 0.86}})
if outcome["rendered"]:
    print("inject before the turn:")
    print(outcome["rendered"])

# Before each tool call: the call runs only if the supervisor lets it.
call_event = {"hook": "on_tool_call", "tool": {"name": "Bash", "arguments": {"command": "rm -rf /"}}}
outcome = report(session, call_event)
if outcome["proceed"] == "no":
    print(f"refused by {outcome['ruling']['rule']}: {outcome['ruling']['reason']}")

# Management: switch a noisy rule off for this user, then look at it.
rule = urllib.parse.quote("research-assistant/search-first", safe="")
status, shown = call("PUT", f"/v1/rules/{rule}/enabled?user=py", {"enabled": False})
print(f"{shown['key']} is {'on' if shown['enabled'] else 'off'} for py")

# A core rule cannot be switched off; the error says why.
status, refusal = call("PUT", "/v1/rules/token-budget-warning/enabled", False)
print(f"{status}: {refusal['error'][:60]}...")

# Bad input is a 4xx that names the field.
status, refusal = call("POST", f"/v1/sessions/{session}/events", {"hook": "on_turn_start", "turn": {"tokens": 5}})
print(f"{status}: {refusal['error']}")

call("DELETE", f"/v1/sessions/{session}")
