//! Background commands of a session: started by `bash` with `run_in_background`, read with
//! `bash_output`, stopped with `bash_kill`, and stopped when the session ends.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::util::MutexExt as _;

use crate::output::RawLog;
use crate::process::{Ending, Event, Running};
use crate::sandbox::protected::Scan;
use crate::spill::{SpillFile, SpillStore};
use crate::terminal::Screen;
use crate::vocab::ToolOutput;

/// Unread output kept per job (of the text shown); older unread output is dropped (the log
/// keeps everything).
const MAX_UNREAD: usize = 1024 * 1024;

/// What a job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobStatus {
    /// Still running.
    Running,
    /// Ended on its own.
    Exited(i32),
    /// Stopped by `bash_kill` or the session ending.
    Killed,
}

/// One background command.
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) command: String,
    pub(crate) sandboxed: bool,
    pub(crate) started: Instant,
    /// What the sandbox protects for it: what it planted is undone when it ends (and before
    /// each command of the session while it runs).
    protected: Option<Arc<Scan>>,
    state: Mutex<JobState>,
    stop: CancellationToken,
    done: watch::Receiver<bool>,
    /// A scan of the roots ran after it ended: its changes were attributed.
    attributed: std::sync::atomic::AtomicBool,
}

struct JobState {
    /// What is unread of the text shown (as a terminal shows the output).
    unread: String,
    /// The line the output is on, and the state of its escape sequences.
    screen: Screen,
    dropped: u64,
    /// The bytes printed.
    log: Option<RawLog>,
    finished_log: Option<SpillFile>,
    status: JobStatus,
    ended_after: Option<Duration>,
}

/// What `bash_output` hands back.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) output: String,
    pub(crate) dropped: u64,
    pub(crate) status: JobStatus,
    pub(crate) elapsed: Duration,
    pub(crate) log: Option<crate::spill::SpillFile>,
}

impl Job {
    /// New output since the last call, and the status.
    pub(crate) fn take(&self) -> Snapshot {
        let mut state = self.state.locked();
        let state = &mut *state;
        // The line the command is on, as it stands (a progress line, a prompt).
        state.screen.flush_partial(&mut state.unread);
        state.trim();
        let output = std::mem::take(&mut state.unread);
        let dropped = std::mem::take(&mut state.dropped);
        Snapshot {
            output,
            dropped,
            status: state.status,
            elapsed: state.ended_after.unwrap_or_else(|| self.started.elapsed()),
            log: state.finished_log.clone(),
        }
    }

    /// The status now.
    pub(crate) fn status(&self) -> JobStatus {
        self.state.locked().status
    }

    /// Stops the job (TERM, grace, KILL to everything it started) and waits for it to end.
    pub(crate) async fn kill(&self, wait: Duration) -> bool {
        self.stop.cancel();
        let mut done = self.done.clone();
        tokio::time::timeout(wait, done.wait_for(|d| *d))
            .await
            .is_ok()
    }
}

impl JobState {
    /// Takes what the command printed: the bytes into the log, the text shown into `unread`.
    fn push(&mut self, bytes: &[u8]) {
        if let Some(log) = &mut self.log {
            log.push(bytes);
        }
        self.screen.feed(bytes, &mut self.unread);
        self.trim();
    }

    /// Drops the oldest unread text past [`MAX_UNREAD`] (at a character boundary).
    fn trim(&mut self) {
        let mut excess = self.unread.len().saturating_sub(MAX_UNREAD);
        if excess > 0 {
            while !self.unread.is_char_boundary(excess) {
                excess += 1;
            }
            self.unread.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

/// The jobs of one session.
#[derive(Default)]
pub(crate) struct Jobs {
    next: AtomicU64,
    jobs: Mutex<Vec<Arc<Job>>>,
}

impl Jobs {
    /// Starts reading a running command in the background and registers it.
    pub(crate) fn start(
        &self,
        mut running: Running,
        command: String,
        protected: Option<Scan>,
        spill: &SpillStore,
    ) -> Arc<Job> {
        let protected = protected.map(Arc::new);
        let id = format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (done_tx, done_rx) = watch::channel(false);
        let stop = CancellationToken::new();
        let job = Arc::new(Job {
            id,
            command,
            sandboxed: protected.is_some(),
            started: running.started(),
            protected: protected.clone(),
            state: Mutex::new(JobState {
                unread: String::new(),
                screen: Screen::new(),
                dropped: 0,
                log: Some(RawLog::new(spill, 256 * 1024, crate::output::MAX_LOG_BYTES)),
                finished_log: None,
                status: JobStatus::Running,
                ended_after: None,
            }),
            stop: stop.clone(),
            done: done_rx,
            attributed: std::sync::atomic::AtomicBool::new(false),
        });
        let reader = Arc::clone(&job);
        tokio::spawn(async move {
            let outcome = running
                .run(None, &stop, None, |event| {
                    let Event::Output(bytes) = event else {
                        return;
                    };
                    let mut state = reader.state.locked();
                    state.push(bytes);
                })
                .await;
            if let Some(protected) = protected {
                let notes = tokio::task::spawn_blocking(move || protected.undo_planted())
                    .await
                    .unwrap_or_default();
                let mut state = reader.state.locked();
                for note in notes {
                    state.push(format!("\n[{note}]\n").as_bytes());
                }
            }
            let mut guard = reader.state.locked();
            let state = &mut *guard;
            state.status = match outcome.ending {
                Ending::Exited(code) => JobStatus::Exited(code),
                Ending::TimedOut | Ending::Cancelled => JobStatus::Killed,
            };
            state.ended_after = Some(outcome.duration);
            // The last line, unfinished, as it stands.
            std::mem::take(&mut state.screen).finish(&mut state.unread);
            state.trim();
            state.finished_log = state.log.take().and_then(RawLog::into_file_if_large);
            drop(guard);
            let _ = done_tx.send(true);
        });
        self.jobs.locked().push(Arc::clone(&job));
        job
    }

    /// The jobs whose changes a scan now may find (id and command): those running, and those
    /// that ended since the last time this was asked.
    pub(crate) fn unattributed(&self) -> Vec<(String, String)> {
        self.jobs
            .locked()
            .iter()
            .filter(|job| {
                job.status() == JobStatus::Running || !job.attributed.swap(true, Ordering::Relaxed)
            })
            .map(|job| (job.id.clone(), job.command.clone()))
            .collect()
    }

    /// The job of an id.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs.locked().iter().find(|j| j.id == id).cloned()
    }

    /// Undoes what running sandboxed jobs planted so far (protected paths they created).
    /// Blocking. Returns a note per path.
    pub(crate) fn undo_planted(&self) -> Vec<String> {
        let running: Vec<Arc<Scan>> = self
            .jobs
            .locked()
            .iter()
            .filter(|j| j.status() == JobStatus::Running)
            .filter_map(|j| j.protected.clone())
            .collect();
        running
            .iter()
            .flat_map(|scan| scan.undo_planted())
            .collect()
    }

    /// The jobs, for messages: `job-1 (running: npm run dev)`.
    pub(crate) fn describe(&self) -> String {
        let jobs = self.jobs.locked();
        if jobs.is_empty() {
            return String::from("this session has no background jobs");
        }
        let list: Vec<String> = jobs
            .iter()
            .map(|j| {
                let status = match j.status() {
                    JobStatus::Running => String::from("running"),
                    JobStatus::Exited(code) => format!("exited {code}"),
                    JobStatus::Killed => String::from("killed"),
                };
                let mut command = j.command.clone();
                if command.chars().count() > 60 {
                    command = command.chars().take(57).collect::<String>() + "...";
                }
                format!("{} ({status}: {command})", j.id)
            })
            .collect();
        format!("this session's jobs: {}", list.join(", "))
    }
}

impl Drop for Jobs {
    /// The session ended: stop every job (the helper kills everything it started).
    fn drop(&mut self) {
        for job in self.jobs.locked().iter() {
            job.stop.cancel();
        }
    }
}

/// The job of an id, or an error listing the jobs there are.
pub(crate) fn find(id: &str, ctx: &ToolContext) -> Result<std::sync::Arc<Job>, ToolError> {
    let jobs = ctx.session().state::<Jobs>();
    jobs.get(id.trim())
        .ok_or_else(|| ToolError::invalid(format!("no background job `{id}`; {}", jobs.describe())))
}

/// The structured result of `bash_output` and `bash_kill`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct JobReport {
    /// The job's id.
    pub(crate) job_id: String,
    /// What the job is doing.
    pub(crate) status: ReportedStatus,
    /// The exit code once it exited on its own; null while running or when stopped.
    pub(crate) exit_code: Option<i32>,
    /// How long it has run, or ran.
    pub(crate) elapsed_ms: u64,
}

/// What a job is doing, as reported.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReportedStatus {
    /// Still running.
    Running,
    /// Ended on its own (see `exit_code`).
    Exited,
    /// Stopped by `bash_kill` or the session ending.
    Killed,
}

/// Output since the last look, then a status line.
pub(crate) fn report(job: &Job, snapshot: &Snapshot) -> ToolOutput {
    let mut text = String::new();
    if snapshot.dropped > 0 {
        let _ = writeln!(text, "[... {} earlier bytes not shown]", snapshot.dropped);
    }
    text.push_str(&snapshot.output);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if snapshot.output.is_empty() && snapshot.dropped == 0 {
        text.push_str("(no new output)\n");
    }
    let seconds = snapshot.elapsed.as_secs_f64();
    let (status, code) = match snapshot.status {
        JobStatus::Running => (
            format!("{} is running ({seconds:.0} s so far)", job.id),
            None,
        ),
        JobStatus::Exited(code) => (
            format!("{} exited with code {code} after {seconds:.1} s", job.id),
            Some(code),
        ),
        JobStatus::Killed => (format!("{} was stopped after {seconds:.1} s", job.id), None),
    };
    let log = snapshot
        .log
        .as_ref()
        .map(|f| format!("; full log: {}", f.path.display()))
        .unwrap_or_default();
    let sandbox = if job.sandboxed {
        "sandboxed"
    } else {
        "not sandboxed"
    };
    let _ = write!(text, "[{status} · {sandbox}{log}]");
    let state = match snapshot.status {
        JobStatus::Running => ReportedStatus::Running,
        JobStatus::Exited(_) => ReportedStatus::Exited,
        JobStatus::Killed => ReportedStatus::Killed,
    };
    ToolOutput::text(text)
        .with_title(job.command.clone())
        .with_structured_of(&JobReport {
            job_id: job.id.clone(),
            status: state,
            exit_code: code,
            elapsed_ms: u64::try_from(snapshot.elapsed.as_millis()).unwrap_or(u64::MAX),
        })
}
