//! The executor: one tick of a compiled tree, and halting.
//!
//! A tree's run state lives in the session ([`TreeRun`]): which nodes are running and where
//! each composite is. A running node is resumed directly at the next tick of its tree (the
//! frame lock): a memory sequence goes straight to its running child, without ticking the
//! children before it. Halting is explicit: a node that stops running because something else
//! decided (a reactive guard, a selector preempting it, a `while` that turned false, a
//! timeout, a parallel sibling) is halted depth first, its scripts closed and its `on_halted`
//! actions applied, and it says so in the trace.
//!
//! Why not bonsai-bt: its memoryless composites rebuild every child's state at each tick
//! (a running branch under a reactive node would restart), and it drops an abandoned child
//! without a callback. Rules still compile into bonsai-bt trees; a behavior is one leaf of
//! those, run by this executor.

use warden_load::Abort;

use crate::behavior::compile::{CKind, Tree};
use warden_load::Hook;

/// What a node came to at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The node succeeded.
    Success,
    /// The node failed.
    Failure,
    /// The node goes on at a later tick.
    Running,
}

/// What a trace records for a node at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// It succeeded.
    Success,
    /// It failed.
    Failure,
    /// It is still running.
    Running,
    /// Its `skip_if` held: it succeeded without running.
    Skipped,
    /// It was stopped while running.
    Halted,
}

impl NodeStatus {
    /// The name traces use.
    pub fn name(self) -> &'static str {
        match self {
            NodeStatus::Success => "success",
            NodeStatus::Failure => "failure",
            NodeStatus::Running => "running",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Halted => "halted",
        }
    }
}

impl Status {
    fn of(ok: bool) -> Status {
        if ok { Status::Success } else { Status::Failure }
    }
}

impl From<Status> for NodeStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Success => NodeStatus::Success,
            Status::Failure => NodeStatus::Failure,
            Status::Running => NodeStatus::Running,
        }
    }
}

/// What a tree needs from the tick it runs in.
pub trait Env {
    /// The hook being ticked.
    fn hook(&self) -> Hook;
    /// The session's turn number.
    fn turn(&self) -> u32;
    /// The tick's time, in seconds.
    fn now(&self) -> f64;
    /// The tool of the event, for tool hooks.
    fn tool(&self) -> Option<&str>;
    /// Evaluates a condition of the tree; an error is reported by the environment and counts
    /// as false.
    fn condition(&mut self, condition: u32) -> bool;
    /// Renders an action group into the tick's effects; false (reported) when it could not.
    fn act(&mut self, group: u32) -> bool;
    /// Starts (or resumes) the script of a node.
    fn script(&mut self, node: u32, script: u32, start: bool) -> Status;
    /// Closes the script of a node that was halted.
    fn halt_script(&mut self, node: u32);
    /// A running node waits for `hook`.
    fn wake(&mut self, hook: Hook);
    /// Records what a node came to.
    fn trace(&mut self, node: u32, status: NodeStatus);
}

/// The run state of one node.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct NodeRun {
    running: bool,
    /// Sequence/selector: the running child's position. Retry/repeat: runs so far.
    cursor: u32,
    /// Wait/timeout: the turn it started in, or waits for.
    turn: u32,
    /// Parallel: the children that finished, and those of them that succeeded.
    done: u64,
    ok: u64,
}

/// What a decorator remembers across runs of its tree, for the whole session.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Memory {
    fires: u32,
    last_turn: Option<u32>,
    last_time: Option<f64>,
}

/// A session's state of one tree (plain data: it is saved with a durable session).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TreeRun {
    nodes: Vec<NodeRun>,
    memory: Vec<Memory>,
    /// The behavior's display id (for reports when it is halted from outside a tick).
    pub key: std::sync::Arc<str>,
}

impl TreeRun {
    /// A run of `tree` that has not started, reported as `key`.
    pub fn new(tree: &Tree, key: std::sync::Arc<str>) -> Self {
        TreeRun {
            nodes: vec![NodeRun::default(); tree.nodes.len()],
            memory: vec![Memory::default(); tree.nodes.len()],
            key,
        }
    }

    /// Stops the run where it is, without a tick: nodes forget their progress (decorator
    /// memory stays). The caller closes the tree's scripts.
    pub fn reset(&mut self) {
        self.nodes.fill(NodeRun::default());
    }

    /// Whether the tree is running (its root is).
    pub fn is_running(&self) -> bool {
        self.nodes.first().is_some_and(|n| n.running)
    }
}

/// Halts a running tree from outside its own run (the session ends, its rule is switched off or
/// left out by a mode) within a tick that applies what the halt renders: depth first, each
/// running node's `on_halted` actions, as when a sibling wins.
pub fn halt_tree(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env) {
    halt(tree, run, env, 0);
    run.reset();
}

/// Ticks the tree once.
pub fn tick(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env) -> Status {
    node(tree, run, env, 0)
}

fn finish(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env, n: u32, status: Status) -> Status {
    let node = &tree.nodes[n as usize];
    match status {
        Status::Running => run.nodes[n as usize].running = true,
        Status::Success | Status::Failure => {
            run.nodes[n as usize] = NodeRun::default();
            let group = if status == Status::Success {
                node.on_success
            } else {
                node.on_failure
            };
            if let Some(g) = group {
                env.act(g);
            }
        }
    }
    env.trace(n, status.into());
    status
}

fn node(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env, n: u32) -> Status {
    let cn = &tree.nodes[n as usize];
    let started = !run.nodes[n as usize].running;
    if started
        && let Some(c) = cn.skip_if
        && env.condition(c)
    {
        env.trace(n, NodeStatus::Skipped);
        return Status::Success;
    }
    if let Some(c) = cn.while_
        && !env.condition(c)
    {
        if !started {
            halt(tree, run, env, n);
        }
        return finish(tree, run, env, n, Status::Failure);
    }
    let cx = &mut Cx {
        tree,
        run,
        env,
        n,
        started,
    };
    // The node kinds, one line each: what each does is in its function.
    let status = match &cn.kind {
        CKind::Sequence { children, reactive } => sequence(cx, children, *reactive),
        CKind::Selector { children, reactive } => selector(cx, children, *reactive),
        CKind::Parallel { children, any } => parallel(cx, children, *any),
        CKind::Guard {
            condition,
            abort,
            child,
        } => guard(cx, *condition, *abort, *child),
        CKind::Invert(c) => match cx.tick(*c) {
            Status::Success => Status::Failure,
            Status::Failure => Status::Success,
            Status::Running => Status::Running,
        },
        CKind::ForceSuccess(c) => match cx.tick(*c) {
            Status::Running => Status::Running,
            _ => Status::Success,
        },
        CKind::ForceFailure(c) => match cx.tick(*c) {
            Status::Running => Status::Running,
            _ => Status::Failure,
        },
        CKind::Cooldown {
            turns,
            seconds,
            child,
        } => cooldown(cx, *turns, *seconds, *child),
        CKind::Once(c) => counted(cx, *c, 1),
        CKind::MaxFires { max, child } => counted(cx, *child, *max),
        CKind::Timeout { turns, child } => timeout(cx, *turns, *child),
        // Retry runs a failed child again; repeat runs a successful one again. Either way the
        // next run starts at once, in the same tick, until the count is reached.
        CKind::Retry { attempts, child } => again(cx, *child, *attempts, Status::Failure),
        CKind::Repeat { times, child } => again(cx, *child, *times, Status::Success),
        CKind::Condition(c) => Status::of(cx.env.condition(*c)),
        CKind::Action(g) => Status::of(cx.env.act(*g)),
        CKind::Script(s) => cx.env.script(n, *s, started),
        CKind::WaitTurns(k) => wait_turns(cx, *k),
        CKind::WaitFor {
            hook,
            tools,
            condition,
        } => wait_for(cx, *hook, tools, *condition),
    };
    finish(tree, run, env, n, status)
}

/// The node being ticked, for the functions of its kind.
struct Cx<'c> {
    tree: &'c Tree,
    run: &'c mut TreeRun,
    env: &'c mut dyn Env,
    /// The node.
    n: u32,
    /// Whether it starts at this tick (it was not running).
    started: bool,
}

impl Cx<'_> {
    /// Ticks child `c`.
    fn tick(&mut self, c: u32) -> Status {
        node(self.tree, self.run, self.env, c)
    }

    /// Halts child `c` (and what runs below it).
    fn halt(&mut self, c: u32) {
        halt(self.tree, self.run, self.env, c);
    }

    /// The node's run state.
    fn state(&mut self) -> &mut NodeRun {
        &mut self.run.nodes[self.n as usize]
    }

    /// Where a composite resumes: its running child, or the first when it starts.
    fn cursor(&mut self) -> usize {
        if self.started {
            0
        } else {
            self.state().cursor as usize
        }
    }
}

/// Children in order until one fails. A reactive sequence checks the conditions before its
/// running child again, and a false one halts the child.
fn sequence(cx: &mut Cx<'_>, children: &[u32], reactive: bool) -> Status {
    let from = cx.cursor();
    if reactive && !cx.started {
        for &c in &children[..from] {
            if matches!(cx.tree.nodes[c as usize].kind, CKind::Condition(_))
                && cx.tick(c) == Status::Failure
            {
                cx.halt(children[from]);
                return Status::Failure;
            }
        }
    }
    walk(cx, children, from, Status::Failure)
}

/// Children in order until one succeeds. Earlier children may preempt the running one: all of
/// them in a reactive selector, guards that abort lower priorities in any selector.
fn selector(cx: &mut Cx<'_>, children: &[u32], reactive: bool) -> Status {
    let mut from = cx.cursor();
    if !cx.started && from > 0 {
        for i in 0..from {
            let c = children[i];
            let preempts = if reactive {
                cx.tick(c) != Status::Failure
            } else {
                match &cx.tree.nodes[c as usize].kind {
                    CKind::Guard {
                        condition, abort, ..
                    } if abort.aborts_lower() => cx.env.condition(*condition),
                    _ => false,
                }
            };
            if preempts {
                cx.halt(children[from]);
                if reactive {
                    // Child i already ran this tick: it decides.
                    return if cx.run.nodes[c as usize].running {
                        cx.state().cursor = i as u32;
                        Status::Running
                    } else {
                        Status::Success
                    };
                }
                from = i;
                break;
            }
        }
    }
    walk(cx, children, from, Status::Success)
}

/// Every child ticked at each tick until the policy decides (all must succeed, or any); the
/// children still running then are halted.
fn parallel(cx: &mut Cx<'_>, children: &[u32], any: bool) -> Status {
    let mut state = cx.run.nodes[cx.n as usize];
    if cx.started {
        state.done = 0;
        state.ok = 0;
    }
    for (i, &c) in children.iter().enumerate() {
        let bit = 1u64 << i;
        if state.done & bit != 0 {
            continue;
        }
        match cx.tick(c) {
            Status::Running => {}
            Status::Success => {
                state.done |= bit;
                state.ok |= bit;
            }
            Status::Failure => state.done |= bit,
        }
    }
    let all = if children.len() == 64 {
        u64::MAX
    } else {
        (1u64 << children.len()) - 1
    };
    let decided = if any {
        if state.ok != 0 {
            Some(Status::Success)
        } else if state.done == all {
            Some(Status::Failure)
        } else {
            None
        }
    } else if state.done & !state.ok != 0 {
        Some(Status::Failure)
    } else if state.ok == all {
        Some(Status::Success)
    } else {
        None
    };
    match decided {
        Some(s) => {
            for (i, &c) in children.iter().enumerate() {
                if state.done & (1 << i) == 0 {
                    cx.halt(c);
                }
            }
            s
        }
        None => {
            let node = cx.state();
            node.done = state.done;
            node.ok = state.ok;
            Status::Running
        }
    }
}

/// The child runs only when the condition holds: checked when the guard starts, and at every
/// tick with `abort = "self"` (false halts the running child).
fn guard(cx: &mut Cx<'_>, condition: u32, abort: Abort, child: u32) -> Status {
    if cx.started || abort.aborts_self() {
        if cx.env.condition(condition) {
            cx.tick(child)
        } else {
            if !cx.started {
                cx.halt(child);
            }
            Status::Failure
        }
    } else {
        cx.tick(child)
    }
}

/// After the child succeeds, the node fails without running it for a number of turns or
/// seconds.
fn cooldown(cx: &mut Cx<'_>, turns: Option<u32>, seconds: Option<f64>, child: u32) -> Status {
    let m = cx.run.memory[cx.n as usize];
    let cooling = cx.started
        && (turns
            .zip(m.last_turn)
            .is_some_and(|(t, last)| cx.env.turn() < last.saturating_add(t))
            || seconds
                .zip(m.last_time)
                .is_some_and(|(s, last)| cx.env.now() < last + s));
    if cooling {
        return Status::Failure;
    }
    let s = cx.tick(child);
    if s == Status::Success {
        let (turn, now) = (cx.env.turn(), cx.env.now());
        let m = &mut cx.run.memory[cx.n as usize];
        m.last_turn = Some(turn);
        m.last_time = Some(now);
    }
    s
}

/// The child is halted, and the node fails, when it runs `turns` turns or more.
fn timeout(cx: &mut Cx<'_>, turns: u32, child: u32) -> Status {
    if cx.started {
        let turn = cx.env.turn();
        cx.state().turn = turn;
    }
    let since = cx.state().turn;
    if !cx.started && cx.env.turn() >= since.saturating_add(turns) {
        cx.halt(child);
        return Status::Failure;
    }
    let s = cx.tick(child);
    if s == Status::Running {
        // Checked at every turn start, whatever the child waits for.
        cx.env.wake(Hook::OnTurnStart);
    }
    s
}

/// Runs until `k` more turns have started.
fn wait_turns(cx: &mut Cx<'_>, k: u32) -> Status {
    if cx.started {
        let until = cx.env.turn().saturating_add(k);
        cx.state().turn = until;
    }
    if !cx.started && cx.env.hook() == Hook::OnTurnStart && cx.env.turn() >= cx.state().turn {
        Status::Success
    } else {
        cx.env.wake(Hook::OnTurnStart);
        Status::Running
    }
}

/// Runs until a later event of `hook` (about one of `tools`, and for which `condition` holds,
/// when given). The event that starts the wait does not count.
fn wait_for(cx: &mut Cx<'_>, hook: Hook, tools: &[String], condition: Option<u32>) -> Status {
    let env = &mut *cx.env;
    let arrived = !cx.started
        && env.hook() == hook
        && (tools.is_empty() || env.tool().is_some_and(|t| tools.iter().any(|x| x == t)))
        && condition.is_none_or(|c| env.condition(c));
    if arrived {
        Status::Success
    } else {
        env.wake(hook);
        Status::Running
    }
}

/// Runs `children` from `from`, in order, until one does not return `pass` (a sequence
/// passes on success, a selector on failure).
fn walk(cx: &mut Cx<'_>, children: &[u32], from: usize, stop_on: Status) -> Status {
    for (i, &c) in children.iter().enumerate().skip(from) {
        match cx.tick(c) {
            Status::Running => {
                cx.state().cursor = i as u32;
                return Status::Running;
            }
            s if s == stop_on => return s,
            _ => {}
        }
    }
    if stop_on == Status::Failure {
        Status::Success
    } else {
        Status::Failure
    }
}

/// `retry` and `repeat`: runs `child` again while it ends in `rerun_on`, `limit` runs in all;
/// the count survives a run that waits.
fn again(cx: &mut Cx<'_>, child: u32, limit: u32, rerun_on: Status) -> Status {
    let mut runs = if cx.started { 0 } else { cx.state().cursor };
    loop {
        match cx.tick(child) {
            Status::Running => {
                cx.state().cursor = runs;
                return Status::Running;
            }
            s if s == rerun_on => {
                runs += 1;
                if runs >= limit {
                    return s;
                }
            }
            s => return s,
        }
    }
}

/// `once` and `max_fires`: the child runs while it has succeeded fewer than `max` times in
/// the session.
fn counted(cx: &mut Cx<'_>, child: u32, max: u32) -> Status {
    if cx.started && cx.run.memory[cx.n as usize].fires >= max {
        return Status::Failure;
    }
    let s = cx.tick(child);
    if s == Status::Success {
        cx.run.memory[cx.n as usize].fires += 1;
    }
    s
}

/// Stops a running node and everything running below it, depth first; applies its
/// `on_halted` actions.
fn halt(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env, n: u32) {
    if !run.nodes[n as usize].running {
        return;
    }
    let cn = &tree.nodes[n as usize];
    match &cn.kind {
        CKind::Sequence { children, .. } | CKind::Selector { children, .. } => {
            let at = run.nodes[n as usize].cursor as usize;
            if let Some(&c) = children.get(at) {
                halt(tree, run, env, c);
            }
        }
        CKind::Parallel { children, .. } => {
            for &c in children {
                halt(tree, run, env, c);
            }
        }
        CKind::Script(_) => env.halt_script(n),
        // A decorator halts its child; the other leaves have nothing to stop.
        kind => {
            if let Some(c) = kind.child() {
                halt(tree, run, env, c);
            }
        }
    }
    run.nodes[n as usize] = NodeRun::default();
    if let Some(g) = cn.on_halted {
        env.act(g);
    }
    env.trace(n, NodeStatus::Halted);
}
