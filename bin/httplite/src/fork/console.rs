//! `--console` under `--runtime fork`: the parent reads stdin in its own
//! `poll` loop, between accepts, and answers each command itself, as no
//! console thread may run beside a fork.

use std::sync::atomic::Ordering;

use super::Parent;
use crate::blocking::conn::Ctx;

impl Parent {
    /// Reads operator commands from `stdin` (`--console`) in the loop,
    /// between accepts: the console's commands, answered by the parent
    /// itself, as no console thread may run beside a fork. `quit` is a
    /// SIGTERM; `reload` and `reopen` do what SIGHUP does; `stats` and
    /// `jobs` ask the jobs process for its numbers (`fork::jobs`); `upgrade`
    /// does what SIGUSR2 does (its outcome follows on stderr); `workers`
    /// answers one line saying why there is nothing to show here.
    pub fn console(&mut self, stdin: crate::console::StdinLines) {
        self.console = Some(stdin);
    }

    /// Runs the commands stdin holds now.
    pub(super) fn read_console(&mut self, ctx: &Ctx) {
        use crate::console::{Command, say};
        let Some(mut stdin) = self.console.take() else {
            return;
        };
        let mut commands = Vec::new();
        let read = stdin.read(|line| {
            let command = Command::parse(line);
            let quit = command == Command::Quit;
            commands.push(command);
            quit
        });
        self.console = Some(stdin);
        for command in commands {
            let answer = match command {
                Command::Empty => String::new(),
                Command::Help => crate::console::HELP.to_string(),
                Command::Stats => {
                    let app = &ctx.app;
                    crate::console::stats_table(&app.stats, 1, &app.jobs, self.started)
                }
                Command::Workers => format!(
                    "workers: none under --runtime fork: one process per connection \
                     ({} alive, {} at most at once)\n",
                    self.page.alive.load(Ordering::Relaxed),
                    self.page.high_water.load(Ordering::Relaxed),
                ),
                // Asked of the jobs process, synchronously: the parent is
                // one thread, and the registry answers in microseconds.
                Command::Jobs => crate::console::jobs_table(&ctx.app.jobs),
                Command::Reload => format!("{}\n", self.tls.reload()),
                Command::Reopen => match self.reopen_line() {
                    Some(line) => format!("{line}\n"),
                    None => "access log: none to reopen (no --access-log)\n".to_string(),
                },
                Command::Upgrade => format!("{}\n", self.start_upgrade()),
                Command::Quit => {
                    // Said first: once stopping, the process may end soon.
                    say(&crate::console::quit_text(self.settings.grace));
                    self.stop_asked();
                    continue;
                }
                Command::Unknown(answer) => answer,
            };
            say(&answer);
        }
        if let Err(e) = read {
            eprintln!("httplite: console: {e}");
        }
    }
}
