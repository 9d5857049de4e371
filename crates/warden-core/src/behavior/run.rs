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

use crate::behavior::compile::{CKind, Tree};
use warden_load::Hook;

/// What a node came to at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Success,
    Failure,
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
pub(crate) trait Env {
    fn hook(&self) -> Hook;
    fn turn(&self) -> u32;
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
#[derive(Debug, Clone, Copy, Default)]
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
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    fires: u32,
    last_turn: Option<u32>,
    last_time: Option<f64>,
}

/// A session's state of one tree.
#[derive(Debug, Clone)]
pub(crate) struct TreeRun {
    nodes: Vec<NodeRun>,
    memory: Vec<Memory>,
    /// The behavior's display id (for reports when it is halted from outside a tick).
    pub key: std::sync::Arc<str>,
}

impl TreeRun {
    pub(crate) fn new(tree: &Tree, key: std::sync::Arc<str>) -> Self {
        TreeRun {
            nodes: vec![NodeRun::default(); tree.nodes.len()],
            memory: vec![Memory::default(); tree.nodes.len()],
            key,
        }
    }

    /// Stops the run where it is, without a tick: nodes forget their progress (decorator
    /// memory stays). The caller closes the tree's scripts.
    pub(crate) fn reset(&mut self) {
        self.nodes.fill(NodeRun::default());
    }

    /// Whether the tree is running (its root is).
    pub(crate) fn is_running(&self) -> bool {
        self.nodes.first().is_some_and(|n| n.running)
    }
}

/// Halts a running tree from outside its own run (the session ends, its rule is switched off or
/// left out by a mode) within a tick that applies what the halt renders: depth first, each
/// running node's `on_halted` actions, as when a sibling wins.
pub(crate) fn halt_tree(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env) {
    halt(tree, run, env, 0);
    run.reset();
}

/// Ticks the tree once.
pub(crate) fn tick(tree: &Tree, run: &mut TreeRun, env: &mut dyn Env) -> Status {
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
    let status = match &cn.kind {
        CKind::Sequence { children, reactive } => {
            let from = if started {
                0
            } else {
                run.nodes[n as usize].cursor as usize
            };
            if *reactive && !started {
                // Conditions before the running child are checked again; a false one halts it.
                for &c in &children[..from] {
                    if matches!(tree.nodes[c as usize].kind, CKind::Condition(_))
                        && node(tree, run, env, c) == Status::Failure
                    {
                        halt(tree, run, env, children[from]);
                        return finish(tree, run, env, n, Status::Failure);
                    }
                }
            }
            walk(tree, run, env, n, children, from, Status::Failure)
        }
        CKind::Selector { children, reactive } => {
            let mut from = if started {
                0
            } else {
                run.nodes[n as usize].cursor as usize
            };
            if !started && from > 0 {
                // Earlier children that may preempt the running one: all of them in a
                // reactive selector, guards that abort lower priorities in any selector.
                for i in 0..from {
                    let c = children[i];
                    let preempts = if *reactive {
                        node(tree, run, env, c) != Status::Failure
                    } else {
                        match &tree.nodes[c as usize].kind {
                            CKind::Guard {
                                condition, abort, ..
                            } if abort.aborts_lower() => env.condition(*condition),
                            _ => false,
                        }
                    };
                    if preempts {
                        halt(tree, run, env, children[from]);
                        if *reactive {
                            // Child i already ran this tick: it decides.
                            let s = if run.nodes[c as usize].running {
                                run.nodes[n as usize].cursor = i as u32;
                                Status::Running
                            } else {
                                Status::Success
                            };
                            return finish(tree, run, env, n, s);
                        }
                        from = i;
                        break;
                    }
                }
            }
            walk(tree, run, env, n, children, from, Status::Success)
        }
        CKind::Parallel { children, any } => {
            let mut state = run.nodes[n as usize];
            if started {
                state.done = 0;
                state.ok = 0;
            }
            for (i, &c) in children.iter().enumerate() {
                let bit = 1u64 << i;
                if state.done & bit != 0 {
                    continue;
                }
                match node(tree, run, env, c) {
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
            let decided = if *any {
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
                            halt(tree, run, env, c);
                        }
                    }
                    s
                }
                None => {
                    run.nodes[n as usize].done = state.done;
                    run.nodes[n as usize].ok = state.ok;
                    Status::Running
                }
            }
        }
        CKind::Guard {
            condition,
            abort,
            child,
        } => {
            if started || abort.aborts_self() {
                if env.condition(*condition) {
                    node(tree, run, env, *child)
                } else {
                    if !started {
                        halt(tree, run, env, *child);
                    }
                    Status::Failure
                }
            } else {
                node(tree, run, env, *child)
            }
        }
        CKind::Invert(c) => match node(tree, run, env, *c) {
            Status::Success => Status::Failure,
            Status::Failure => Status::Success,
            Status::Running => Status::Running,
        },
        CKind::ForceSuccess(c) => match node(tree, run, env, *c) {
            Status::Running => Status::Running,
            _ => Status::Success,
        },
        CKind::ForceFailure(c) => match node(tree, run, env, *c) {
            Status::Running => Status::Running,
            _ => Status::Failure,
        },
        CKind::Cooldown {
            turns,
            seconds,
            child,
        } => {
            let m = run.memory[n as usize];
            let cooling = started
                && (turns
                    .zip(m.last_turn)
                    .is_some_and(|(t, last)| env.turn() < last.saturating_add(t))
                    || seconds
                        .zip(m.last_time)
                        .is_some_and(|(s, last)| env.now() < last + s));
            if cooling {
                Status::Failure
            } else {
                let s = node(tree, run, env, *child);
                if s == Status::Success {
                    let m = &mut run.memory[n as usize];
                    m.last_turn = Some(env.turn());
                    m.last_time = Some(env.now());
                }
                s
            }
        }
        CKind::Once(c) => counted(tree, run, env, n, *c, 1, started),
        CKind::MaxFires { max, child } => counted(tree, run, env, n, *child, *max, started),
        CKind::Timeout { turns, child } => {
            if started {
                run.nodes[n as usize].turn = env.turn();
            }
            let since = run.nodes[n as usize].turn;
            if !started && env.turn() >= since.saturating_add(*turns) {
                halt(tree, run, env, *child);
                Status::Failure
            } else {
                let s = node(tree, run, env, *child);
                if s == Status::Running {
                    // Checked at every turn start, whatever the child waits for.
                    env.wake(Hook::OnTurnStart);
                }
                s
            }
        }
        // Retry runs a failed child again; repeat runs a successful one again. Either way the
        // next run starts at once, in the same tick, until the count is reached.
        CKind::Retry { attempts, child } => again(
            tree,
            run,
            env,
            n,
            *child,
            *attempts,
            Status::Failure,
            started,
        ),
        CKind::Repeat { times, child } => {
            again(tree, run, env, n, *child, *times, Status::Success, started)
        }
        CKind::Condition(c) => Status::of(env.condition(*c)),
        CKind::Action(g) => Status::of(env.act(*g)),
        CKind::Script(s) => env.script(n, *s, started),
        CKind::WaitTurns(k) => {
            if started {
                run.nodes[n as usize].turn = env.turn().saturating_add(*k);
            }
            if !started
                && env.hook() == Hook::OnTurnStart
                && env.turn() >= run.nodes[n as usize].turn
            {
                Status::Success
            } else {
                env.wake(Hook::OnTurnStart);
                Status::Running
            }
        }
        CKind::WaitFor {
            hook,
            tools,
            condition,
        } => {
            // The event that starts the wait does not count: it waits for a later one.
            let arrived = !started
                && env.hook() == *hook
                && (tools.is_empty() || env.tool().is_some_and(|t| tools.iter().any(|x| x == t)))
                && condition.is_none_or(|c| env.condition(c));
            if arrived {
                Status::Success
            } else {
                env.wake(*hook);
                Status::Running
            }
        }
    };
    finish(tree, run, env, n, status)
}

/// Runs `children` from `from`, in order, until one does not return `pass` (a sequence
/// passes on success, a selector on failure).
fn walk(
    tree: &Tree,
    run: &mut TreeRun,
    env: &mut dyn Env,
    n: u32,
    children: &[u32],
    from: usize,
    stop_on: Status,
) -> Status {
    for (i, &c) in children.iter().enumerate().skip(from) {
        match node(tree, run, env, c) {
            Status::Running => {
                run.nodes[n as usize].cursor = i as u32;
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
#[allow(clippy::too_many_arguments)]
fn again(
    tree: &Tree,
    run: &mut TreeRun,
    env: &mut dyn Env,
    n: u32,
    child: u32,
    limit: u32,
    rerun_on: Status,
    started: bool,
) -> Status {
    let mut runs = if started {
        0
    } else {
        run.nodes[n as usize].cursor
    };
    loop {
        match node(tree, run, env, child) {
            Status::Running => {
                run.nodes[n as usize].cursor = runs;
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
fn counted(
    tree: &Tree,
    run: &mut TreeRun,
    env: &mut dyn Env,
    n: u32,
    child: u32,
    max: u32,
    started: bool,
) -> Status {
    if started && run.memory[n as usize].fires >= max {
        return Status::Failure;
    }
    let s = node(tree, run, env, child);
    if s == Status::Success {
        run.memory[n as usize].fires += 1;
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
