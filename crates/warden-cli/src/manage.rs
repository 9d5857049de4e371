//! `warden rules ...` and `warden plugins list`: what is loaded, and the users' choices.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Subcommand;
use warden_core::{Config, PluginInfo, RuleInfo, RuleState, SetBy, SettingInfo, Warden};

use crate::setup::{build, open_store};
use crate::{json_out, render_diagnostics};
use warden_wire::v1;

#[derive(Subcommand, Debug)]
pub(crate) enum RulesCommand {
    /// Every rule, with its plugin, hook, priority, state for the user, core flag and settings.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One rule in full.
    Show {
        /// `id`, or `plugin/id` for a plugin's rule.
        rule: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Switch a rule (or every rule of a plugin) on for the user.
    Enable {
        #[command(flatten)]
        target: Target,
    },
    /// Switch a rule (or every rule of a plugin) off for the user (core rules cannot be
    /// switched off).
    Disable {
        #[command(flatten)]
        target: Target,
    },
    /// Put a rule (or every rule of a plugin) in shadow for the user: it is evaluated at every
    /// tick and what it would have decided is logged (`warden log --shadow`), counted and
    /// streamed, but nothing it decides applies and nothing it says is injected. Core rules
    /// cannot be put in shadow.
    Shadow {
        #[command(flatten)]
        target: Target,
    },
    /// Forget the user's choice for a rule (or every rule of a plugin): its file's `enabled`
    /// and `shadow` apply again.
    Reset {
        #[command(flatten)]
        target: Target,
    },
    /// Set a plugin setting for the user (in every project, or with --in-project in the
    /// current one only). The value must fit the setting's type and bounds.
    Set {
        /// `plugin.setting`, e.g. `builtin.token_budget_threshold`.
        key: String,
        /// The value: `12`, `0.75`, `true`, or text.
        value: String,
        /// Only in the current project (--project, or `project` in warden.toml).
        #[arg(long)]
        in_project: bool,
        /// Print the setting as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove the user's value for a setting: the default applies again.
    Unset {
        /// `plugin.setting`.
        key: String,
        /// The value set for the current project only.
        #[arg(long)]
        in_project: bool,
        /// Print the setting as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The rule, or plugin, a switch applies to.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["rule", "plugin"])))]
pub(crate) struct Target {
    /// `id`, or `plugin/id`.
    rule: Option<String>,
    /// Every rule of this plugin instead of one rule (its core rules stay on).
    #[arg(long, conflicts_with = "rule", value_name = "PLUGIN")]
    plugin: Option<String>,
    /// Print the rule (or the plugin's rules) as JSON.
    #[arg(long)]
    json: bool,
}

fn warden(config: &Config) -> Result<Warden, String> {
    let w = build(config, false, false)?;
    let diagnostics = w.diagnostics();
    if diagnostics.iter().any(|d| d.is_error()) {
        eprint!("{}", render_diagnostics(&diagnostics));
    }
    Ok(w)
}

pub(crate) fn rules(config: &Config, command: RulesCommand) -> Result<ExitCode, String> {
    let (user, project) = (config.user.as_str(), config.project.as_str());
    let writes = !matches!(
        command,
        RulesCommand::List { .. } | RulesCommand::Show { .. }
    );
    if writes {
        // A choice not stored anywhere would be lost at once.
        open_store(config, "changing a rule or setting")?;
    }
    let w = warden(config)?;
    let project_scope = |in_project: bool| in_project.then_some(project);
    match command {
        RulesCommand::List { json } => {
            let list = w.rule_list(user, project);
            if json {
                json_out(&list.iter().map(v1::RuleInfo::from).collect::<Vec<_>>())?;
            } else {
                print!("{}", rule_table(&list, user));
            }
        }
        RulesCommand::Show { rule, json } => {
            let info = w
                .rule_info(user, project, &rule)
                .map_err(|e| e.to_string())?;
            if json {
                json_out(&v1::RuleInfo::from(&info))?;
            } else {
                print!("{}", rule_details(&info, user));
            }
        }
        RulesCommand::Enable { target } => return switch(&w, user, target, Some(RuleState::On)),
        RulesCommand::Disable { target } => {
            return switch(&w, user, target, Some(RuleState::Off));
        }
        RulesCommand::Shadow { target } => {
            return switch(&w, user, target, Some(RuleState::Shadow));
        }
        RulesCommand::Reset { target } => return switch(&w, user, target, None),
        RulesCommand::Set {
            key,
            value,
            in_project,
            json,
        } => {
            let s = w
                .set_setting_text(user, project_scope(in_project), &key, &value)
                .map_err(|e| e.to_string())?;
            if json {
                return json_out(&v1::SettingInfo::from(&s)).map(|()| ExitCode::SUCCESS);
            }
            println!(
                "{} = {} for {user}{}",
                s.key,
                s.value,
                if in_project {
                    format!(" in project {project}")
                } else {
                    String::new()
                }
            );
        }
        RulesCommand::Unset {
            key,
            in_project,
            json,
        } => {
            let s = w
                .reset_setting(user, project_scope(in_project), &key)
                .map_err(|e| e.to_string())?;
            if json {
                return json_out(&v1::SettingInfo::from(&s)).map(|()| ExitCode::SUCCESS);
            }
            println!("{} = {} for {user} ({})", s.key, s.value, set_by(s.set_by));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `warden rules enable`, `disable`, `shadow` and `reset` (`None`: the files apply again).
fn switch(
    w: &Warden,
    user: &str,
    target: Target,
    state: Option<RuleState>,
) -> Result<ExitCode, String> {
    let infos = match (&target.rule, &target.plugin) {
        (_, Some(plugin)) => w.set_plugin_state(user, plugin, state),
        (Some(rule), None) => match state {
            Some(state) => w.set_rule_state(user, rule, state),
            None => w.reset_rule(user, rule),
        }
        .map(|info| vec![info]),
        (None, None) => return Err("name a rule, or a plugin with --plugin".into()),
    }
    .map_err(|e| match (&e, &target.rule) {
        // A plugin's id given as a rule: say how to switch the whole plugin.
        (warden_core::ControlError::UnknownRule { .. }, Some(rule))
            if w.program().plugins().iter().any(|p| p.id == *rule) =>
        {
            format!("`{rule}` is a plugin, not a rule: give `--plugin {rule}` to switch all its rules, or `{rule}/RULE` for one")
        }
        _ => e.to_string(),
    })?;
    if target.json {
        match (target.plugin.is_some(), infos.as_slice()) {
            (false, [info]) => json_out(&v1::RuleInfo::from(info))?,
            _ => json_out(&infos.iter().map(v1::RuleInfo::from).collect::<Vec<_>>())?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    for info in &infos {
        let core = if info.core && state.is_some_and(|s| s != RuleState::On) {
            " (a core rule: users cannot switch it off or to shadow)"
        } else if state == Some(RuleState::Shadow) && info.state == RuleState::Off {
            " (its file leaves it off: switch it on first to see it in shadow)"
        } else {
            ""
        };
        match state {
            Some(_) => println!(
                "{} is {} for {user}{core}",
                info.key,
                state_words(info.state)
            ),
            None => println!(
                "{} follows its file again: {} for {user}",
                info.key,
                state_words(info.state)
            ),
        }
    }
    if state == Some(RuleState::Shadow) {
        println!(
            "what it would have decided, beside what the live rules did: `warden log --shadow` (with the same --config)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `on`, `off`, or `in shadow`.
fn state_words(state: RuleState) -> &'static str {
    match state {
        RuleState::Shadow => "in shadow",
        other => other.name(),
    }
}

fn set_by(s: SetBy) -> &'static str {
    match s {
        SetBy::Default => "default",
        SetBy::User => "set by the user",
        SetBy::Project => "set for this project",
    }
}

fn settings_text(settings: &[SettingInfo]) -> String {
    settings
        .iter()
        .map(|s| {
            format!(
                "{}={}{}",
                s.def.name,
                s.value,
                if s.set_by == SetBy::Default { "" } else { "*" }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn rule_table(list: &[RuleInfo], user: &str) -> String {
    let rows: Vec<[String; 7]> = list
        .iter()
        .map(|r| {
            [
                r.key.clone(),
                r.plugin.clone(),
                r.hook.name().to_string(),
                r.priority.to_string(),
                r.state.name().to_string(),
                if r.core { "core" } else { "" }.to_string(),
                settings_text(&r.settings),
            ]
        })
        .collect();
    let header = [
        "RULE", "PLUGIN", "HOOK", "PRIORITY", "STATE", "CORE", "SETTINGS",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 7]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    let _ = writeln!(
        out,
        "\n{} rules for user {user}; `*` marks a setting the user changed. STATE `shadow`: evaluated, nothing it decides applies. Core rules cannot be switched off.",
        list.len()
    );
    out
}

fn rule_details(r: &RuleInfo, user: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}  ({})", r.key, r.name);
    if !r.description.is_empty() {
        let _ = writeln!(out, "  {}", r.description);
    }
    let _ = writeln!(out, "  plugin     {}", r.plugin);
    let _ = writeln!(out, "  version    {}", r.version);
    let _ = writeln!(out, "  file       {}", r.file);
    let _ = writeln!(out, "  hook       {}", r.hook.name());
    let _ = writeln!(out, "  priority   {}", r.priority);
    let _ = writeln!(out, "  condition  {}", r.condition);
    let state = match (r.state, r.choice.is_some()) {
        (state, true) => format!(
            "{} for {user} (switched by {user}; `warden rules reset` goes back to the file's {})",
            state_words(state),
            state_words(r.default_state)
        ),
        (RuleState::On, false) => format!("on for {user}"),
        (RuleState::Off, false) => format!("off for {user} (its file says `enabled = false`)"),
        (RuleState::Shadow, false) => format!(
            "in shadow for {user} (its file, or its plugin's manifest, says `shadow = true`): evaluated, nothing it decides applies"
        ),
    };
    let _ = writeln!(out, "  state      {state}");
    if r.core {
        let _ = writeln!(
            out,
            "  core       yes: users cannot switch it off (it guards the session itself)"
        );
    }
    if !r.tags.is_empty() {
        let _ = writeln!(out, "  tags       {}", r.tags.join(", "));
    }
    if !r.settings.is_empty() {
        let _ = writeln!(out, "  settings of plugin {}:", r.plugin);
        for s in &r.settings {
            let _ = writeln!(out, "    {}", setting_line(s));
        }
    }
    out
}

fn setting_line(s: &SettingInfo) -> String {
    let mut bounds = Vec::new();
    if let Some(min) = s.def.min {
        bounds.push(format!("min {min}"));
    }
    if let Some(max) = s.def.max {
        bounds.push(format!("max {max}"));
    }
    if !s.def.options.is_empty() {
        bounds.push(format!("one of {}", s.def.options.join(", ")));
    }
    let by = if s.set_by == SetBy::Default {
        String::new()
    } else {
        format!(", {} (default {})", set_by(s.set_by), s.def.default)
    };
    format!(
        "{} = {}  ({}{}{by}){}",
        s.key,
        s.value,
        s.def.kind.name(),
        if bounds.is_empty() {
            String::new()
        } else {
            format!(", {}", bounds.join(", "))
        },
        if s.def.description.is_empty() {
            String::new()
        } else {
            format!("\n        {}", s.def.description)
        }
    )
}

pub(crate) fn plugins(config: &Config, json: bool) -> Result<ExitCode, String> {
    let w = warden(config)?;
    let program = w.program();
    let list: &[PluginInfo] = program.plugins();
    if json {
        json_out(&list.iter().map(v1::Plugin::from).collect::<Vec<_>>())?;
        return Ok(crate::load_status(&w));
    }
    let settings = w.setting_list(&config.user, &config.project);
    for p in list {
        let status = match &p.skipped {
            Some(why) => format!("skipped: {why}"),
            None => format!(
                "{} rule{}",
                p.rules.len(),
                if p.rules.len() == 1 { "" } else { "s" }
            ),
        };
        println!("{} {}  ({status})", p.id, p.version);
        if p.name != p.id {
            println!("  {}", p.name);
        }
        if !p.description.is_empty() {
            println!("  {}", p.description);
        }
        if let Some(dir) = &p.dir {
            println!("  folder    {}", dir.display());
        }
        if !p.requires.is_empty() {
            println!("  requires  {}", p.requires.join(", "));
        }
        if !p.rules.is_empty() {
            let rules: Vec<String> = p
                .rules
                .iter()
                .map(|r| match p.rule_versions.get(r) {
                    Some(v) => format!("{r} {v}"),
                    None => r.clone(),
                })
                .collect();
            println!("  rules     {}", rules.join(", "));
        }
        for s in settings.iter().filter(|s| s.plugin == p.id) {
            println!("  setting   {}", setting_line(s));
        }
        if p.skipped.is_some() {
            for d in &p.settings {
                println!(
                    "  setting   {}.{} = {} ({})",
                    p.id,
                    d.name,
                    d.default,
                    d.kind.name()
                );
            }
        }
    }
    if list.is_empty() {
        println!("no plugins loaded");
    }
    Ok(crate::load_status(&w))
}
