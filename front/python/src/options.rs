//! Python arguments to tagwire options: durations, domains, subscription
//! options and history queries (`Last`, `Since`, `Between`).

use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::bad_arg;

/// A duration in seconds from Python: finite and not negative.
pub(crate) fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    if s.is_nan() || s < 0.0 {
        return Err(bad_arg(format!(
            "{what} must be a number of seconds >= 0, not {s}"
        )));
    }
    Duration::try_from_secs_f64(s)
        .map_err(|_| bad_arg(format!("{what} of {s} seconds is too large")))
}

/// A receive timeout: `None` (or infinity) waits for ever.
pub(crate) fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    match t {
        None => Ok(None),
        Some(s) if s == f64::INFINITY => Ok(None),
        // A timeout too large to represent is "for ever", as in Rust.
        Some(s) => match seconds("timeout", s) {
            Ok(d) => Ok(Some(d)),
            Err(_) if s.is_finite() && s > 0.0 => Ok(None),
            Err(e) => Err(e),
        },
    }
}

/// `"global"` or `"local"`.
pub(crate) fn domain(s: &str) -> PyResult<tagwire::Domain> {
    match s {
        "global" => Ok(tagwire::Domain::Global),
        "local" => Ok(tagwire::Domain::Local),
        other => Err(bad_arg(format!(
            "domain must be \"global\" or \"local\", not {other:?}"
        ))),
    }
}

/// [`seconds`], refusing zero.
fn positive(what: &str, s: f64) -> PyResult<Duration> {
    let d = seconds(what, s)?;
    if d.is_zero() {
        return Err(bad_arg(format!("{what} must be more than 0 seconds")));
    }
    Ok(d)
}

/// The keyword arguments of `Client.subscribe`, checked.
pub(crate) struct Subscribe<'a> {
    /// `None`: the library's default (64, or a smaller ring's slots).
    pub(crate) depth: Option<u32>,
    pub(crate) reliability: &'a str,
    pub(crate) carrier: &'a str,
    pub(crate) every: u32,
    pub(crate) proxy: &'a str,
    pub(crate) delay_bound: Option<f64>,
    pub(crate) lossless: bool,
    pub(crate) busy_poll: Option<f64>,
    pub(crate) exclusive: bool,
    pub(crate) deadline: Option<f64>,
    pub(crate) min_separation: Option<f64>,
    pub(crate) priority: &'a str,
    pub(crate) sched: &'a str,
}

impl Subscribe<'_> {
    /// The Rust options, applied in the order of the Rust builder calls.
    pub(crate) fn build(&self) -> PyResult<tagwire::SubscribeOptions> {
        if self.depth == Some(0) {
            return Err(bad_arg("depth must be at least 1"));
        }
        let mut o = tagwire::SubscribeOptions::default();
        if let Some(d) = self.depth {
            o = o.depth(d);
        }
        let class: tagwire::Priority = self
            .priority
            .parse()
            .map_err(|e: String| bad_arg(format!("priority: {e}")))?;
        o = o.priority(class);
        let sched: tagwire::Sched = self
            .sched
            .parse()
            .map_err(|e: String| bad_arg(format!("sched: {e}")))?;
        o = o.sched(sched);
        match self.reliability {
            "reliable" => {}
            "best_effort" | "best-effort" => o = o.best_effort(),
            other => {
                return Err(bad_arg(format!(
                    "reliability must be \"reliable\" or \"best_effort\", not {other:?}"
                )))
            }
        }
        match self.carrier {
            "udp" => {}
            "tcp" => o = o.tcp(),
            // Multicast is best-effort (nothing is resent), as in Rust.
            "multicast" => o = o.multicast(),
            other => {
                return Err(bad_arg(format!(
                    "carrier must be \"udp\", \"tcp\" or \"multicast\", not {other:?}"
                )))
            }
        }
        o = o.every(self.every);
        let proxy: tagwire::Proxy = self.proxy.parse().map_err(bad_arg)?;
        let proxy = match (proxy, self.delay_bound) {
            (p, None) => p,
            (tagwire::Proxy::Auto { delay_bound_us }, Some(b))
                if delay_bound_us == tagwire::Proxy::UNBOUNDED =>
            {
                tagwire::Proxy::auto(seconds("delay_bound", b)?)
            }
            (p, Some(_)) => {
                return Err(bad_arg(format!(
                    "delay_bound goes with proxy=\"auto\" only (got proxy={p})"
                )))
            }
        };
        o = o.proxy(proxy);
        if self.lossless {
            o = o.lossless();
        }
        if let Some(b) = self.busy_poll {
            o = o.busy_poll(seconds("busy_poll", b)?);
        }
        if self.exclusive {
            o = o.exclusive();
        }
        if let Some(d) = self.deadline {
            o = o.deadline(positive("deadline", d)?);
        }
        if let Some(d) = self.min_separation {
            o = o.min_separation(positive("min_separation", d)?);
        }
        Ok(o)
    }
}

/// History query: the last `n` messages kept by the daemon.
#[pyclass(module = "tagwire._tagwire", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Last {
    /// How many messages (the newest ones).
    #[pyo3(get)]
    n: u32,
}

#[pymethods]
impl Last {
    #[new]
    fn new(n: u32) -> Self {
        Self { n }
    }

    fn __repr__(&self) -> String {
        format!("Last({})", self.n)
    }
}

/// History query: the kept messages whose (per-publisher) sequence number is
/// at least `seq`.
#[pyclass(module = "tagwire._tagwire", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Since {
    /// The first sequence number wanted.
    #[pyo3(get)]
    seq: u64,
}

#[pymethods]
impl Since {
    #[new]
    fn new(seq: u64) -> Self {
        Self { seq }
    }

    fn __repr__(&self) -> String {
        format!("Since({})", self.seq)
    }
}

/// History query: the kept messages sent within `[from_ns, to_ns]`
/// (publisher's clock, nanoseconds since the Unix epoch, both inclusive).
#[pyclass(module = "tagwire._tagwire", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Between {
    /// Start, inclusive (ns since the epoch).
    #[pyo3(get)]
    from_ns: u64,
    /// End, inclusive (ns since the epoch).
    #[pyo3(get)]
    to_ns: u64,
}

#[pymethods]
impl Between {
    #[new]
    fn new(from_ns: u64, to_ns: u64) -> PyResult<Self> {
        if from_ns > to_ns {
            return Err(bad_arg(format!(
                "Between(from_ns={from_ns}, to_ns={to_ns}): from_ns is after to_ns"
            )));
        }
        Ok(Self { from_ns, to_ns })
    }

    fn __repr__(&self) -> String {
        format!("Between({}, {})", self.from_ns, self.to_ns)
    }
}

/// A history query from Python: `Last`, `Since` or `Between`.
pub(crate) fn history_query(q: &Bound<'_, PyAny>) -> PyResult<tagwire::HistoryQuery> {
    if let Ok(l) = q.cast::<Last>() {
        return Ok(tagwire::HistoryQuery::Last(l.get().n));
    }
    if let Ok(s) = q.cast::<Since>() {
        return Ok(tagwire::HistoryQuery::Since(s.get().seq));
    }
    if let Ok(b) = q.cast::<Between>() {
        let b = b.get();
        return Ok(tagwire::HistoryQuery::Between {
            from_ns: b.from_ns,
            to_ns: b.to_ns,
        });
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "a history query is tagwire.Last(n), tagwire.Since(seq) or \
         tagwire.Between(from_ns, to_ns), not {}",
        q.get_type()
            .name()
            .map_or_else(|_| "this".into(), |n| n.to_string())
    )))
}
