//! The command-line reference, generated from the CLI's definition.
//!
//! `docs/cli.md` (its generated part, between two marker lines) and the man
//! page `docs/httplite.1` are rendered from [`httplite::cli::Cli`]'s clap
//! `Command`, so that they list every flag with the help text `--help`
//! prints. This test renders both and compares them with the committed
//! files; with `HTTPLITE_REGENERATE_DOCS=1` it rewrites them instead:
//!
//! ```sh
//! HTTPLITE_REGENERATE_DOCS=1 cargo test -p httplite --test cli_reference
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use httplite::cli::Cli;

const BEGIN: &str =
    "<!-- BEGIN GENERATED: the flags, from bin/httplite/src/cli.rs; do not edit by hand -->";
const END: &str = "<!-- END GENERATED -->";
const HOW: &str = "HTTPLITE_REGENERATE_DOCS=1 cargo test -p httplite --test cli_reference";

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn regenerate() -> bool {
    std::env::var_os("HTTPLITE_REGENERATE_DOCS").is_some_and(|v| v != "0")
}

/// `text` with the characters Markdown would read as emphasis escaped,
/// outside `code spans` (help texts write globs such as `'*.woff2'`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => in_code = !in_code,
            '*' | '_' if !in_code => out.push('\\'),
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The flags as Markdown: one entry per argument, in the order `--help`
/// lists them, with its value name, default, choices and full help text.
fn flags_markdown() -> String {
    let cmd = Cli::command();
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push_str("\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        for para in about.to_string().split("\n\n") {
            writeln!(out, "{}\n", escape(&para.replace('\n', " "))).unwrap();
        }
    }
    out.push_str("```text\nhttplite [OPTIONS]\n```\n\n");
    for arg in cmd.get_arguments() {
        if arg.is_hide_set() {
            continue;
        }
        let mut title = String::new();
        if let Some(short) = arg.get_short() {
            write!(title, "-{short}, ").unwrap();
        }
        match arg.get_long() {
            Some(long) => write!(title, "--{long}").unwrap(),
            None => write!(title, "{}", arg.get_id()).unwrap(),
        }
        let takes_value = arg.get_action().takes_values();
        if takes_value {
            let names: Vec<String> = arg
                .get_value_names()
                .map(|v| v.iter().map(|n| n.to_string()).collect())
                .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()]);
            let name = names.join(" ");
            let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
            let eq = if arg.is_require_equals_set() {
                "="
            } else {
                " "
            };
            if optional {
                write!(title, "[{eq}{name}]").unwrap();
            } else {
                write!(title, "{eq}{name}").unwrap();
            }
        }
        writeln!(out, "### `{}`\n", title.trim_end()).unwrap();
        if let Some(help) = arg.get_long_help().or(arg.get_help()) {
            for para in help.to_string().split("\n\n") {
                writeln!(out, "{}\n", escape(&para.replace('\n', " "))).unwrap();
            }
        }
        let choices: Vec<String> = if takes_value {
            arg.get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| match v.get_help() {
                    Some(h) => format!("- `{}`: {}", v.get_name(), escape(&h.to_string())),
                    None => format!("- `{}`", v.get_name()),
                })
                .collect()
        } else {
            Vec::new()
        };
        if !choices.is_empty() {
            writeln!(out, "Values:\n\n{}\n", choices.join("\n")).unwrap();
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if takes_value && !defaults.is_empty() {
            writeln!(out, "Default: `{}`\n", defaults.join(",")).unwrap();
        }
        if arg.get_action().takes_values() && matches!(arg.get_action(), clap::ArgAction::Append) {
            out.push_str("Repeatable.\n\n");
        }
    }
    out.push_str(END);
    out
}

fn man_page() -> Vec<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .expect("render the man page");
    out
}

/// `docs/cli.md` with its generated part replaced by `generated`, keeping
/// the hand-written text before and after the markers.
fn splice(page: &str, generated: &str) -> Option<String> {
    let start = page.find(BEGIN)?;
    let end = page[start..].find(END)? + start + END.len();
    Some(format!("{}{}{}", &page[..start], generated, &page[end..]))
}

#[test]
fn cli_reference_matches_the_cli() {
    let md_path = docs().join("cli.md");
    let man_path = docs().join("httplite.1");
    let page = std::fs::read_to_string(&md_path).unwrap_or_default();
    let wanted_md = splice(&page, &flags_markdown());
    let wanted_man = man_page();

    if regenerate() {
        let md = wanted_md
            .unwrap_or_else(|| format!("# Command-line reference\n\n{}\n", flags_markdown()));
        std::fs::write(&md_path, md).expect("write docs/cli.md");
        std::fs::write(&man_path, &wanted_man).expect("write docs/httplite.1");
        return;
    }

    let wanted_md = wanted_md.unwrap_or_else(|| {
        panic!(
            "docs/cli.md is missing or has no generated part (the line `{BEGIN}`); \
             regenerate it with `{HOW}`"
        )
    });
    assert!(
        page == wanted_md,
        "docs/cli.md's list of flags differs from the CLI (bin/httplite/src/cli.rs); \
         regenerate it with `{HOW}`"
    );
    let man = std::fs::read(&man_path).unwrap_or_default();
    assert!(
        man == wanted_man,
        "docs/httplite.1 differs from the CLI (bin/httplite/src/cli.rs); \
         regenerate it with `{HOW}`"
    );
}
