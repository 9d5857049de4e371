//! Hostile input sizes and shapes, through the public API: a rule file with thousands of
//! mistakes, rule test files that are pipes or too large, and traces with lines that are not
//! UTF-8, that are too long, or that start with a byte order mark.

use std::fs;
use std::io::BufReader;
use std::path::Path;

use warden_core::{Capabilities, Diagnostic, Hook, Program, RuleSource, SourceFile, Warden, load};
use warden_trace::{MAX_TRACE_LINE_BYTES, parse_trace, read_trace};

const HEAD: &str = "[rule]\nid = \"a\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n";

fn compile(dir: &Path) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let loaded = load(&[RuleSource::Dir(dir.to_path_buf())], &Capabilities::Any);
    let from_loader = loaded.diagnostics.clone();
    (
        from_loader,
        Program::compile(loaded, 0).diagnostics().to_vec(),
    )
}

#[test]
fn thousands_of_mistakes_in_one_file_are_capped_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(HEAD);
    for _ in 0..10_000 {
        text.push_str("[[action]]\ntype = \"lg\"\nmessage = \"x\"\n");
    }
    fs::write(dir.path().join("r.toml"), &text).unwrap();
    // A second file with a mistake of its own keeps it: the cap is per file.
    fs::write(
        dir.path().join("s.toml"),
        "[rule]\nid = \"s\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"lg\"\nmessage = \"x\"\n",
    )
    .unwrap();
    let (from_loader, compiled) = compile(dir.path());
    // The loader's list and the program's (sorted and capped again, with the summary merged)
    // agree.
    for diags in [&from_loader, &compiled] {
        let in_r: Vec<&Diagnostic> = diags
            .iter()
            .filter(|d| d.path().ends_with("r.toml"))
            .collect();
        assert_eq!(in_r.len(), Diagnostic::MAX_PER_FILE + 1);
        let (summary, shown) = in_r.split_last().unwrap();
        assert!(shown.iter().all(|d| d.omitted() == 0 && d.is_error()));
        assert!(
            shown
                .iter()
                .all(|d| d.message() == "unknown action type `lg`")
        );
        // In file order, each `type` value at column 8, three lines apart.
        for (i, d) in shown.iter().enumerate() {
            assert_eq!(d.location(), Some((6 + 3 * i, 8)), "{d}");
        }
        assert_eq!(summary.omitted(), 10_000 - Diagnostic::MAX_PER_FILE);
        assert!(summary.is_error());
        assert_eq!(summary.location(), None);
        assert!(
            summary
                .message()
                .contains("and 9900 more problems in this file"),
            "{}",
            summary.message()
        );
        let in_s: Vec<&Diagnostic> = diags
            .iter()
            .filter(|d| d.path().ends_with("s.toml"))
            .collect();
        assert_eq!(in_s.len(), 1);
        assert_eq!(in_s[0].location(), Some((6, 8)));
    }
}

#[test]
fn a_file_at_the_cap_gets_no_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(HEAD);
    for _ in 0..Diagnostic::MAX_PER_FILE {
        text.push_str("[[action]]\ntype = \"lg\"\nmessage = \"x\"\n");
    }
    fs::write(dir.path().join("r.toml"), &text).unwrap();
    let (_, compiled) = compile(dir.path());
    assert_eq!(compiled.len(), Diagnostic::MAX_PER_FILE);
    assert!(compiled.iter().all(|d| d.omitted() == 0));
}

#[test]
fn places_late_in_a_big_file_are_right_and_columns_count_characters() {
    let dir = tempfile::tempdir().unwrap();
    let comment = "# é 日本 ü\n";
    let lines = 40_000;
    let mut text = comment.repeat(lines);
    let bad = "action = { message = \"日本語 é\", type = \"lg\" }\n";
    text.push_str(bad);
    text.push_str(HEAD);
    assert!(text.len() < 1 << 20);
    fs::write(dir.path().join("big.toml"), &text).unwrap();
    let (_, compiled) = compile(dir.path());
    let d = compiled
        .iter()
        .find(|d| d.message() == "unknown action type `lg`")
        .unwrap_or_else(|| panic!("{compiled:#?}"));
    let prefix = &bad[..bad.find("\"lg\"").unwrap()];
    assert_eq!(
        d.location(),
        Some((lines + 1, prefix.chars().count() + 1)),
        "{d}"
    );

    // Against a count from the start, at places all through the file (inside a character
    // too, which counts as its start, and past the end).
    let file = SourceFile::new("big.toml", text.clone());
    let naive = |offset: usize| {
        let mut o = offset.min(text.len());
        while !text.is_char_boundary(o) {
            o -= 1;
        }
        let before = &text[..o];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().unwrap().chars().count() + 1;
        (line, col)
    };
    for offset in (0..text.len() + 10).step_by(997).chain([
        0,
        1,
        3,
        comment.len() - 1,
        comment.len(),
        text.len() - 1,
        text.len(),
        text.len() + 1,
    ]) {
        assert_eq!(file.line_col(offset), naive(offset), "at byte {offset}");
    }
}

#[cfg(unix)]
#[test]
fn a_trace_with_bad_bytes_a_huge_line_and_a_bom_replays_its_good_lines() {
    let long = "a".repeat(MAX_TRACE_LINE_BYTES + 10);
    let mut trace: Vec<u8> = Vec::new();
    // Line 1 (event 0): a good event after a byte order mark.
    trace.extend_from_slice(
        b"\xEF\xBB\xBF{\"hook\": \"on_turn_start\", \"turn\": {\"token_usage\": 0.85}}\n",
    );
    // Line 2: not UTF-8.
    trace.extend_from_slice(b"{\"hook\": \"on_turn_start\", \"data\": \"caf\xE9\"}\n");
    // Line 3: longer than the limit.
    trace.extend_from_slice(
        format!("{{\"hook\": \"on_turn_start\", \"data\": \"{long}\"}}\n").as_bytes(),
    );
    // Line 4: a comment that is not UTF-8, skipped like any comment.
    trace.extend_from_slice(b"// caf\xE9\n");
    // Line 5: a comment longer than the limit, skipped too; line 6, blank and long.
    trace.extend_from_slice(format!("// {long}\r\n").as_bytes());
    trace.extend_from_slice(format!("{}\n", " ".repeat(MAX_TRACE_LINE_BYTES + 1)).as_bytes());
    // Line 7 (event 6): good, with a Windows line ending.
    trace
        .extend_from_slice(b"{\"hook\": \"on_turn_start\", \"turn\": {\"token_usage\": 0.95}}\r\n");
    // Line 8: a bad event, reported as before.
    trace.extend_from_slice(b"{\"hook\": \"on_turn_strat\"}\n");
    // Line 9 (event 8): good, the last line, without a newline.
    trace.extend_from_slice(b"{\"hook\": \"on_turn_end\"}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    fs::write(&path, &trace).unwrap();

    let w = Warden::builder().builtin_rules().build().unwrap();
    let mut session = w.session();
    let mut replayed = Vec::new();
    let mut errors = Vec::new();
    let file = BufReader::new(fs::File::open(&path).unwrap());
    for (index, parsed) in read_trace(file) {
        match parsed {
            Ok(e) => {
                let hook = e.hook;
                let outcome = session.tick_shared(hook, e.event);
                let fired: Vec<String> = outcome
                    .effects
                    .iter()
                    .map(|x| x.rule().to_string())
                    .collect();
                replayed.push((index, hook, fired));
            }
            Err(e) => {
                assert_eq!(e.line, index);
                errors.push(e.to_string());
            }
        }
    }
    assert_eq!(
        replayed,
        vec![
            (
                0,
                Hook::OnTurnStart,
                vec!["token-budget-warning".to_string()]
            ),
            (
                6,
                Hook::OnTurnStart,
                vec!["token-budget-warning".to_string()]
            ),
            (8, Hook::OnTurnEnd, vec![]),
        ]
    );
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].starts_with("line 2: not UTF-8 text"),
        "{}",
        errors[0]
    );
    assert_eq!(
        errors[1],
        "line 3: longer than 1 MiB; an event this large is not a hook report"
    );
    assert!(
        errors[2].starts_with("line 8:") && errors[2].contains("did you mean `on_turn_start`"),
        "{}",
        errors[2]
    );

    // The whole-text reader agrees, on what text can hold.
    let text = String::from_utf8_lossy(&trace).into_owned();
    let all = parse_trace(&text);
    let lines: Vec<(usize, bool)> = all.iter().map(|(i, r)| (*i, r.is_ok())).collect();
    // Line 2 is now valid UTF-8 (with a replacement character) and reads as an event.
    assert_eq!(
        lines,
        vec![
            (0, true),
            (1, true),
            (2, false),
            (6, true),
            (7, false),
            (8, true)
        ]
    );
}

#[test]
fn a_bom_is_ignored_on_the_first_line_only() {
    let all = parse_trace(
        "\u{feff}{\"hook\": \"on_turn_start\"}\n\u{feff}{\"hook\": \"on_turn_start\"}\n",
    );
    assert!(all[0].1.is_ok());
    assert!(
        all[1]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .starts_with("line 2: not valid JSON")
    );
}

#[test]
fn a_line_of_the_longest_length_is_read_whatever_its_line_break() {
    // `{"hook":"on_turn_start","data":"aaa…"}` of exactly the longest length.
    let line = |len: usize| {
        let head = r#"{"hook":"on_turn_start","data":""#;
        let tail = r#""}"#;
        format!("{head}{}{tail}", "a".repeat(len - head.len() - tail.len()))
    };
    for end in ["\n", "\r\n", "\r", ""] {
        let text = format!("{}{end}", line(MAX_TRACE_LINE_BYTES));
        let read = parse_trace(&text);
        assert_eq!(read.len(), 1, "{end:?}");
        assert!(read[0].1.is_ok(), "{end:?}: {:?}", read[0].1.as_ref().err());
        if !end.ends_with('\n') {
            continue;
        }
        let text = format!(
            "{}{end}{{\"hook\":\"on_turn_end\"}}\n",
            line(MAX_TRACE_LINE_BYTES + 1)
        );
        let read = parse_trace(&text);
        assert_eq!(read.len(), 2, "{end:?}");
        let e = read[0].1.as_ref().unwrap_err();
        assert!(e.message.contains("longer than 1 MiB"), "{end:?}: {e:?}");
        assert!(read[1].1.is_ok(), "{end:?}: the next line is read");
    }
}
