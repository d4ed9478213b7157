//! Long operations as server-side jobs: each runs on its own thread and is kept in a table
//! (id, kind, state, progress with ETA, cancel flag, result or error, log), so a page that is
//! reloaded, or another tab, finds it again and can cancel it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Local};
use serde::Serialize;
use serde_json::{Value, json};

/// Lines of log a job keeps (the rest are counted).
const LOG_LINES: usize = 500;
/// Finished jobs kept in the table.
const KEEP_FINISHED: usize = 100;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Working.
    Running,
    /// Finished successfully.
    Done,
    /// Finished, but with errors: entries a backup could not read (its snapshot is marked
    /// incomplete) or a restore could not write; `arca backup`/`arca restore` exit with 3.
    Incomplete,
    /// Stopped by an error, or a check that found errors (`arca check` exits with 1).
    Failed,
    /// Stopped on request.
    Cancelled,
}

/// One reading of a job's progress.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Progress {
    /// What it does now (`scanning`, `restoring`...).
    pub phase: String,
    /// Done so far, from 0 to 1, when the total is known.
    pub fraction: Option<f64>,
    /// The counts, for a person (`12 of 40 files, 3.1 MiB of 9.0 MiB`).
    pub text: String,
    /// Seconds left, when they can be estimated.
    pub eta_seconds: Option<f64>,
}

type Reader = Box<dyn Fn(Duration) -> Progress + Send + Sync>;

struct Inner {
    state: JobState,
    finished: Option<DateTime<Local>>,
    took: Option<Duration>,
    result: Option<Value>,
    error: Option<String>,
    log: Vec<String>,
    log_dropped: u64,
    reader: Option<Reader>,
    last: Progress,
}

/// A long operation.
pub struct Job {
    /// Its number in the table.
    pub id: u64,
    /// `restore`, `backup`, `check`, `forget`, `prune`.
    pub kind: &'static str,
    /// What it works on, for a person.
    pub title: String,
    /// The parameters it was started with (to run it again, e.g. a dry run for real).
    pub params: Value,
    started: DateTime<Local>,
    clock: Instant,
    cancel: Arc<AtomicBool>,
    inner: Mutex<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a running job's code uses to report.
pub struct JobCtx {
    job: Arc<Job>,
}

impl JobCtx {
    /// The flag the job's library call watches.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.job.cancel)
    }

    /// Whether cancelling was asked for.
    pub fn cancelled(&self) -> bool {
        self.job.cancel.load(Ordering::Relaxed)
    }

    /// Sets how the progress is read (called on every poll with the time since the start).
    pub fn progress(&self, reader: impl Fn(Duration) -> Progress + Send + Sync + 'static) {
        lock(&self.job.inner).reader = Some(Box::new(reader));
    }

    /// Sets a fixed progress (a phase without counts).
    pub fn phase(&self, phase: &str) {
        let mut i = lock(&self.job.inner);
        i.reader = None;
        i.last = Progress {
            phase: phase.to_string(),
            ..Progress::default()
        };
    }

    /// Adds a line to the job's log.
    pub fn log(&self, line: impl Into<String>) {
        let mut i = lock(&self.job.inner);
        if i.log.len() < LOG_LINES {
            i.log.push(line.into());
        } else {
            i.log_dropped += 1;
        }
    }
}

impl Job {
    /// The job as the API shows it.
    pub fn json(&self) -> Value {
        let mut i = lock(&self.inner);
        let elapsed = i.took.unwrap_or_else(|| self.clock.elapsed());
        if i.state == JobState::Running {
            if let Some(r) = &i.reader {
                i.last = r(elapsed);
            }
        } else {
            // Ended: nothing is left to wait for, whether it succeeded or not.
            i.last.eta_seconds = None;
            if i.state == JobState::Done {
                i.last.fraction = Some(1.0);
            }
        }
        json!({
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "params": self.params,
            "state": i.state,
            "started": self.started.to_rfc3339(),
            "finished": i.finished.map(|f| f.to_rfc3339()),
            "elapsed_seconds": elapsed.as_secs_f64(),
            "progress": i.last,
            "cancel_requested": self.cancel.load(Ordering::Relaxed),
            "result": i.result,
            "error": i.error,
            "log": i.log,
            "log_dropped": i.log_dropped,
        })
    }

    /// Where the job is.
    pub fn state(&self) -> JobState {
        lock(&self.inner).state
    }

    /// Asks the job to stop; a job that has ended is left as it is (it showed
    /// `cancel_requested` on a job that had finished on its own).
    pub fn cancel(&self) {
        let i = lock(&self.inner);
        if i.state == JobState::Running {
            self.cancel.store(true, Ordering::Relaxed);
        }
    }
}

/// How a job that returned `result` ended, as the CLI's exit code says: a check that found
/// errors (`"ok": false`) failed (exit 1), with the count as its error; a result with errors
/// (a count above 0) or an incomplete snapshot (`"complete": false`) is incomplete (exit 3).
fn ended(result: &Value) -> (JobState, Option<String>) {
    let errors = match &result["errors"] {
        Value::Array(a) => a.len() as u64,
        v => v.as_u64().unwrap_or(0),
    };
    if result["ok"] == Value::Bool(false) {
        let n = errors.max(1);
        let s = if n == 1 { "" } else { "s" };
        return (
            JobState::Failed,
            Some(format!("the check found {n} error{s}")),
        );
    }
    if errors > 0 || result["complete"] == Value::Bool(false) {
        return (JobState::Incomplete, None);
    }
    (JobState::Done, None)
}

/// The jobs of this server, newest last.
#[derive(Default)]
pub struct JobTable {
    jobs: Mutex<Vec<Arc<Job>>>,
    next: AtomicU64,
    running: Arc<AtomicU64>,
}

impl JobTable {
    /// Starts `work` on its own thread as a job of `kind`; its `Ok` value is the result, its
    /// `Err` the error line (a job whose cancel flag was set ends `cancelled`).
    pub fn spawn<F>(
        &self,
        kind: &'static str,
        title: String,
        params: Value,
        work: F,
    ) -> Result<Arc<Job>, String>
    where
        F: FnOnce(&JobCtx) -> Result<Value, String> + Send + 'static,
    {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Arc::new(Job {
            id,
            kind,
            title,
            params,
            started: Local::now(),
            clock: Instant::now(),
            cancel: Arc::new(AtomicBool::new(false)),
            inner: Mutex::new(Inner {
                state: JobState::Running,
                finished: None,
                took: None,
                result: None,
                error: None,
                log: vec![],
                log_dropped: 0,
                reader: None,
                last: Progress {
                    phase: "starting".into(),
                    ..Progress::default()
                },
            }),
        });
        let ctx = JobCtx {
            job: Arc::clone(&job),
        };
        let running = Arc::clone(&self.running);
        running.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name(format!("ui-job-{id}"))
            .spawn(move || {
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&ctx)))
                    .unwrap_or_else(|_| Err("internal error: the job panicked".into()));
                let job = &ctx.job;
                let mut i = lock(&job.inner);
                if let Some(r) = i.reader.take() {
                    i.last = r(job.clock.elapsed());
                }
                i.took = Some(job.clock.elapsed());
                i.finished = Some(Local::now());
                match out {
                    Ok(v) => {
                        let (state, error) = ended(&v);
                        i.state = state;
                        i.error = error;
                        i.result = Some(v);
                    }
                    Err(e) => {
                        i.state = if job.cancel.load(Ordering::Relaxed) {
                            JobState::Cancelled
                        } else {
                            JobState::Failed
                        };
                        i.error = Some(e);
                    }
                }
                drop(i);
                running.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            self.running.fetch_sub(1, Ordering::SeqCst);
            return Err(format!("cannot start the job: {e}"));
        }
        let mut jobs = lock(&self.jobs);
        jobs.push(Arc::clone(&job));
        // Forget the oldest finished jobs beyond the limit.
        let finished = jobs
            .iter()
            .filter(|j| j.state() != JobState::Running)
            .count();
        if finished > KEEP_FINISHED {
            let mut drop_n = finished - KEEP_FINISHED;
            jobs.retain(|j| {
                if drop_n > 0 && j.state() != JobState::Running {
                    drop_n -= 1;
                    false
                } else {
                    true
                }
            });
        }
        Ok(job)
    }

    /// The job numbered `id`.
    pub fn get(&self, id: u64) -> Option<Arc<Job>> {
        lock(&self.jobs).iter().find(|j| j.id == id).cloned()
    }

    /// Every job, newest first.
    pub fn list(&self) -> Vec<Arc<Job>> {
        let mut v = lock(&self.jobs).clone();
        v.reverse();
        v
    }

    /// Asks every running job to stop.
    pub fn cancel_all(&self) {
        for j in lock(&self.jobs).iter() {
            j.cancel();
        }
    }

    /// The jobs still running, as "#ID TITLE", oldest first.
    pub fn running(&self) -> Vec<String> {
        lock(&self.jobs)
            .iter()
            .filter(|j| j.state() == JobState::Running)
            .map(|j| format!("#{} {}", j.id, j.title))
            .collect()
    }

    /// Waits until no job runs, at most `grace`.
    pub fn wait_idle(&self, grace: Duration) {
        let until = Instant::now() + grace;
        while self.running.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(j: &Job) -> JobState {
        for _ in 0..500 {
            if j.state() != JobState::Running {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        j.state()
    }

    #[test]
    fn jobs_finish_fail_and_cancel() {
        let t = JobTable::default();
        let ok = t
            .spawn("check", "a".into(), json!({}), |ctx| {
                ctx.log("one line");
                Ok(json!({"answer": 42}))
            })
            .expect("spawn");
        assert_eq!(wait(&ok), JobState::Done);
        let v = ok.json();
        assert_eq!(v["result"]["answer"], 42);
        assert_eq!(v["progress"]["fraction"], 1.0);
        assert_eq!(v["log"][0], "one line");
        let bad = t
            .spawn("check", "b".into(), json!({}), |_| Err("it broke".into()))
            .expect("spawn");
        assert_eq!(wait(&bad), JobState::Failed);
        assert_eq!(bad.json()["error"], "it broke");
        // Finished with errors is not done, as the CLI's exit codes 3 and 1 say.
        for (result, state, error) in [
            (
                json!({"errors": 2, "complete": false}),
                "incomplete",
                Value::Null,
            ),
            (json!({"errors": 1}), "incomplete", Value::Null),
            (json!({"errors": 0, "complete": true}), "done", Value::Null),
            (
                json!({"ok": false, "errors": ["x", "y"]}),
                "failed",
                json!("the check found 2 errors"),
            ),
            (json!({"ok": true, "errors": []}), "done", Value::Null),
        ] {
            let r = result.clone();
            let j = t
                .spawn("restore", "e".into(), json!({}), move |_| Ok(r))
                .expect("spawn");
            wait(&j);
            let v = j.json();
            assert_eq!(v["state"], state, "{result}");
            assert_eq!(v["error"], error, "{result}");
            assert_eq!(v["result"], result);
        }
        let long = t
            .spawn("backup", "c".into(), json!({}), |ctx| {
                ctx.progress(|_| Progress {
                    phase: "busy".into(),
                    fraction: Some(0.5),
                    eta_seconds: Some(3.5),
                    ..Progress::default()
                });
                while !ctx.cancelled() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err("interrupted".into())
            })
            .expect("spawn");
        for _ in 0..500 {
            if long.json()["progress"]["fraction"] == 0.5 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(long.json()["progress"]["fraction"], 0.5);
        assert_eq!(t.list().len(), 8);
        assert_eq!(t.list()[0].id, long.id);
        t.cancel_all();
        assert_eq!(wait(&long), JobState::Cancelled);
        // An ended job has nothing left to wait for.
        assert_eq!(long.json()["progress"]["eta_seconds"], Value::Null);
        assert_eq!(long.json()["progress"]["fraction"], 0.5);
        assert_eq!(t.running(), Vec::<String>::new());
        let stuck = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stuck);
        let slow = t
            .spawn("backup", "slow one".into(), json!({}), move |_| {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(json!({}))
            })
            .expect("spawn");
        t.cancel_all();
        t.wait_idle(Duration::from_millis(50));
        // A job that did not stop in time is named.
        assert_eq!(t.running(), [format!("#{} slow one", slow.id)]);
        stuck.store(true, Ordering::Relaxed);
        t.wait_idle(Duration::from_secs(5));
        assert_eq!(t.running(), Vec::<String>::new());
        assert!(t.get(ok.id).is_some());
        assert!(t.get(99).is_none());
    }
}
