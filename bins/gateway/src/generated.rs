//! `conclave completions SHELL` and `conclave man`: a shell completion script and the manual
//! page, generated from the clap definitions of [`crate::cli`], so they always list the verbs
//! and options this very binary has. Packagers run them at build time
//! (`packaging/README.md`).

use std::io::{self, Write};
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::output::errln;

/// Writes the completion script for `shell` to standard output.
pub(crate) fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "conclave", &mut out);
    write_out(&out)
}

/// Writes the manual page (roff, section 1) to standard output.
pub(crate) fn man() -> ExitCode {
    let mut out = Vec::new();
    match render_man(&mut out) {
        Ok(()) => write_out(&out),
        Err(err) => {
            errln!("error: cannot render the manual page: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The manual page: the command, a list of the verbs, then one section per verb (and per
/// verb of a verb, such as `leader set`) with its synopsis, description and options, so that
/// `man conclave` documents everything on one page.
fn render_man(out: &mut Vec<u8>) -> io::Result<()> {
    let command = Cli::command().name("conclave");
    let page = clap_mangen::Man::new(command.clone());
    page.render_title(out)?;
    page.render_name_section(out)?;
    page.render_synopsis_section(out)?;
    page.render_description_section(out)?;
    page.render_options_section(out)?;
    writeln!(out, ".SH COMMANDS")?;
    for (path, verb) in verbs(&command, "conclave") {
        let about = verb
            .get_about()
            .map(ToString::to_string)
            .unwrap_or_default();
        writeln!(
            out,
            ".TP\n\\fB{}\\fR\n{}",
            roff_text(&path),
            roff_text(&about)
        )?;
    }
    for (path, verb) in verbs(&command, "conclave") {
        writeln!(out, ".SH \"{}\"", path.to_uppercase())?;
        let verb = verb.bin_name(path).disable_help_subcommand(true);
        let sub = clap_mangen::Man::new(verb.clone());
        let mut part = Vec::new();
        sub.render_synopsis_section(&mut part)?;
        sub.render_description_section(&mut part)?;
        if verb.get_arguments().any(|arg| !arg.is_hide_set()) {
            sub.render_options_section(&mut part)?;
        }
        // Each part starts with its own `.SH`: inside a verb's section they become `.SS`.
        let text = String::from_utf8_lossy(&part).replace(".SH ", ".SS ");
        out.extend_from_slice(text.as_bytes());
    }
    writeln!(out, ".SH \"EXIT STATUS\"")?;
    for (code, meaning) in crate::EXIT_STATUSES {
        writeln!(
            out,
            ".TP\n\\fB{}\\fR\n{}",
            roff_text(code),
            roff_text(meaning)
        )?;
    }
    page.render_version_section(out)?;
    Ok(())
}

/// Every verb under `command`, depth first, with its full name (`conclave leader set`).
fn verbs(command: &clap::Command, path: &str) -> Vec<(String, clap::Command)> {
    let mut found = Vec::new();
    for verb in command.get_subcommands() {
        let name = format!("{path} {}", verb.get_name());
        found.push((name.clone(), verb.clone()));
        found.extend(verbs(verb, &name));
    }
    found
}

/// Text made safe for a roff line: backslashes and hyphens escaped, no leading dot.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.strip_prefix('.') {
        Some(rest) => format!("\\&.{rest}"),
        None => escaped,
    }
}

/// Writes the generated text (see [`crate::output`]: a reader gone away is no failure).
fn write_out(bytes: &[u8]) -> ExitCode {
    crate::output::out!("{}", String::from_utf8_lossy(bytes));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every verb the CLI has appears in every completion script and in the manual page.
    #[test]
    fn completions_and_man_page_cover_every_verb() {
        let verbs: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|verb| verb.get_name().to_owned())
            .collect();
        assert!(verbs.len() >= 10, "{verbs:?}");
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut command = Cli::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command, "conclave", &mut out);
            let script = String::from_utf8(out).unwrap();
            for verb in &verbs {
                assert!(script.contains(verb.as_str()), "{shell}: {verb} missing");
            }
        }
        let mut out = Vec::new();
        render_man(&mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH conclave 1"),
            "{page}"
        );
        for verb in &verbs {
            assert!(
                page.contains(&format!(".SH \"CONCLAVE {}\"", verb.to_uppercase())),
                "{verb} has no section"
            );
        }
        assert!(
            page.contains(".SH \"CONCLAVE LEADER SET\""),
            "verbs of verbs too"
        );
        assert!(
            !page.contains("(1)"),
            "no reference to pages that do not exist"
        );
        assert!(
            page.contains("SIGHUP"),
            "the run verb's signals are documented"
        );
    }

    /// Issue 15 item 4: the manual page's NAME line says what conclave is (not the package's
    /// description), and its EXIT STATUS section documents every code the binary exits with.
    #[test]
    fn man_page_names_conclave_and_documents_every_exit_code() {
        let mut out = Vec::new();
        render_man(&mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(
            page.contains("conclave \\- a leader\\-election gateway"),
            "{page}"
        );
        assert!(!page.contains("The conclave binary"), "{page}");
        let section = page
            .split_once(".SH \"EXIT STATUS\"")
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("no EXIT STATUS section:\n{page}"));
        for code in [
            0,
            1,
            crate::EXIT_USAGE,
            crate::EXIT_DATAERR,
            crate::EXIT_NOINPUT,
            crate::EXIT_UNAVAILABLE,
            crate::EXIT_SOFTWARE,
            crate::EXIT_CANTCREAT,
            crate::output::EXIT_IO,
            crate::EXIT_TEMPFAIL,
            crate::EXIT_NOPERM,
            crate::lock::EXIT_WAIT_EXPIRED,
            crate::lock::EXIT_LOCK_LOST,
        ] {
            assert!(
                section.contains(&format!(".TP\n\\fB{code}\\fR\n")),
                "exit code {code} undocumented:\n{section}"
            );
        }
    }
}
