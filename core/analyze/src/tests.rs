use super::*;

fn costs(entries: &[(&str, usize, &str, f64)]) -> Costs {
    Costs::new(
        entries
            .iter()
            .map(|(call, size, place, us)| CallCost {
                call: (*call).into(),
                size: *size,
                place: (*place).into(),
                max_us: *us,
                p999_us: us / 2.0,
                mean_us: None,
            })
            .collect(),
        CostFigure::Max,
    )
}

fn periodic(name: &str, node: &str, priority: u32, period: f64, wcet: f64) -> Task {
    Task {
        name: name.into(),
        node: node.into(),
        priority,
        period: Some(period),
        on: None,
        wcet,
        deadline: None,
        sends: vec![],
        receives: vec![],
    }
}

fn uses(tag: &str, size: usize) -> TagUse {
    TagUse {
        tag: tag.into(),
        size,
        every: 1,
    }
}

#[test]
fn the_textbook_task_set_has_its_textbook_response_times() {
    // Periods 7, 12, 20 and costs 3, 3, 5, rate-monotonic: R = 3, 6, 20.
    let set = TaskSet {
        task: vec![
            periodic("t1", "n", 3, 7.0, 3.0),
            periodic("t2", "n", 2, 12.0, 3.0),
            periodic("t3", "n", 1, 20.0, 5.0),
        ],
        ..TaskSet::default()
    };
    let a = analyze(&set, &Costs::default()).unwrap();
    let r: Vec<Option<f64>> = a.tasks.iter().map(|t| t.response).collect();
    assert_eq!(r, vec![Some(3.0), Some(6.0), Some(20.0)]);
    assert!(a.ok());
    // One more unit for t3: it no longer fits.
    let mut worse = set.clone();
    worse.task[2].wcet = 6.0;
    let a = analyze(&worse, &Costs::default()).unwrap();
    assert_eq!(a.tasks[2].response, None);
    assert!(!a.tasks[2].schedulable && !a.ok());
    // 6 + 3·3 + 2·3 = 21: at least 1 past its deadline.
    assert_eq!(a.tasks[2].overrun, Some(1.0));
    assert!(table(&a).contains("+1000.0000"), "{}", table(&a));
    assert_eq!(
        response_time(1.0, 0.0, &[(2.0, 1.0, 0.0)], 0.0, 5.0),
        Ok(2.0)
    );
    assert_eq!(
        response_time(3.0, 0.0, &[(2.0, 1.0, 0.0)], 0.0, 5.0),
        Err(6.0)
    );
    // A quarter of the CPU the platform's: 1 + 0.25·4 + ⌈4 / 2⌉ = 4.
    assert_eq!(
        response_time(1.0, 0.0, &[(2.0, 1.0, 0.0)], 0.25, 5.0),
        Ok(4.0)
    );
}

#[test]
fn the_platform_takes_the_share_stolen_from_the_most_urgent_thread() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert_eq!(Costs::default().platform_share(), 0.0);
    // 1 % of one CPU, 2 % of the other (mean per 10 ms window); the
    // maximum (a stall of 6 ms) is not the share.
    let stolen = |mean_us: f64| CallCost {
        call: "stolen".into(),
        size: 10_000,
        place: "local".into(),
        max_us: 6_000.0,
        p999_us: 6_000.0,
        mean_us: Some(mean_us),
    };
    let c = Costs::new(vec![stolen(100.0), stolen(200.0)], CostFigure::Max);
    assert!(close(c.platform_share(), 0.02), "{}", c.platform_share());
    // A task of 4.9 ms alone: 4.9 / 0.98 = 5 ms, of which 0.1 the platform.
    let set = TaskSet {
        task: vec![periodic("t", "n", 1, 0.01, 0.0049)],
        ..TaskSet::default()
    };
    let a = analyze(&set, &c).unwrap();
    assert!(
        close(a.tasks[0].response.unwrap(), 0.005),
        "{:?}",
        a.tasks[0]
    );
    assert!(close(a.tasks[0].platform, 0.0001), "{:?}", a.tasks[0]);
    assert!(table(&a).contains("0.1000"), "{}", table(&a));
    // Without the records, as before.
    let a = analyze(&set, &Costs::default()).unwrap();
    assert_eq!(
        (a.tasks[0].response, a.tasks[0].platform),
        (Some(0.0049), 0.0)
    );
}

#[test]
fn calls_cost_what_was_measured_at_the_next_size_up_and_remote_when_a_receiver_is() {
    let c = costs(&[
        ("send", 64, "local", 1.0),
        ("send", 1024, "local", 2.0),
        ("send", 64, "remote", 10.0),
        ("send", 1024, "remote", 20.0),
        ("receive", 1024, "local", 3.0),
    ]);
    assert_eq!(c.of("send", 100, false).unwrap(), 2e-6);
    assert_eq!(c.of("send", 64, true).unwrap(), 10e-6);
    let err = c.of("send", 4096, true).unwrap_err();
    assert!(
        err.to_string().contains("tagwire perf costs --remote"),
        "{err}"
    );
    let mut s = periodic("s", "a", 2, 0.01, 0.001);
    s.sends = vec![uses("/x", 100)];
    let mut r = periodic("r", "b", 1, 0.01, 0.001);
    r.receives = vec![uses("/x", 100)];
    let set = TaskSet {
        task: vec![s, r],
        ..TaskSet::default()
    };
    let a = analyze(&set, &c).unwrap();
    let cost = |n: &str| a.tasks.iter().find(|t| t.task.ends_with(n)).unwrap().cost;
    assert!((cost("/s") - (0.001 + 20e-6)).abs() < 1e-12);
    assert!((cost("/r") - (0.001 + 3e-6)).abs() < 1e-12);
    // The p99.9 figure when asked.
    let p = Costs::new(c.calls.clone(), CostFigure::P999);
    assert_eq!(p.of("send", 64, true).unwrap(), 5e-6);
}

#[test]
fn a_flow_adds_responses_the_network_sampling_and_every_nth_waits() {
    let set = TaskSet::from_toml(
        r#"
        [platform]
        network = 0.001

        [[task]]
        name = "sensor"
        node = "a"
        priority = 10
        period = 0.01
        wcet = 0.001
        sends = [{ tag = "/s" }]

        [[task]]
        name = "ctl"
        node = "b"
        priority = 10
        on = "/s"
        wcet = 0.002
        receives = [{ tag = "/s", every = 2 }]
        sends = [{ tag = "/c" }]

        [[task]]
        name = "act"
        node = "b"
        priority = 5
        period = 0.02
        wcet = 0.001
        receives = [{ tag = "/c" }]

        [[flow]]
        name = "loop"
        path = ["sensor", "ctl", "act"]
        deadline = 0.05
        "#,
    )
    .unwrap();
    let zero = costs(&[
        ("send", 64, "local", 0.0),
        ("send", 64, "remote", 0.0),
        ("receive", 64, "local", 0.0),
    ]);
    let a = analyze(&set, &zero).unwrap();
    let r = |n: &str| {
        a.tasks
            .iter()
            .find(|t| t.task.ends_with(n))
            .unwrap()
            .response
            .unwrap()
    };
    // ctl runs on every 2nd sensor message: period 20 ms.
    assert_eq!(
        a.tasks.iter().find(|t| t.task == "b/ctl").unwrap().period,
        0.02
    );
    assert!((r("/sensor") - 0.001).abs() < 1e-12);
    assert!((r("/ctl") - 0.002).abs() < 1e-12);
    // act waits for one ctl job (its jitter 2 ms, period 20 ms): 1 + 2.
    assert!((r("/act") - 0.003).abs() < 1e-12);
    let f = &a.flows[0];
    let names: Vec<&str> = f.parts.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "R(sensor)",
            "net(/s)",
            "every 2",
            "R(ctl)",
            "sample(act)",
            "R(act)"
        ]
    );
    // 1 + 1 + 10 + 2 + 20 + 3 ms.
    assert!((f.bound.unwrap() - 0.037).abs() < 1e-12, "{f:?}");
    assert!(f.met);
}

#[test]
fn a_messages_jitter_counts_against_lower_priorities_on_its_receivers_node() {
    // ev runs on each of fast's messages, which arrive with up to 4 ms of
    // jitter (fast's response, across the network): two ev jobs can hit
    // low's window where their period alone allows one.
    let mut fast = periodic("fast", "a", 9, 0.010, 0.003);
    fast.sends = vec![uses("/e", 64)];
    let mut ev = periodic("ev", "b", 8, 1.0, 0.002);
    ev.period = None;
    ev.on = Some("/e".into());
    ev.receives = vec![uses("/e", 64)];
    let low = periodic("low", "b", 1, 0.1, 0.007);
    let set = TaskSet {
        platform: Platform {
            network: 0.001,
            ..Platform::default()
        },
        task: vec![fast, ev, low],
        ..TaskSet::default()
    };
    let zero = costs(&[("send", 64, "remote", 0.0), ("receive", 64, "local", 0.0)]);
    let a = analyze(&set, &zero).unwrap();
    let low = a.tasks.iter().find(|t| t.task == "b/low").unwrap();
    // Without jitter: 7 + 2 = 9 ms; with it, ⌈(R + 4) / 10⌉ = 2 jobs: 11.
    assert!((low.response.unwrap() - 0.011).abs() < 1e-12, "{low:?}");
}

#[test]
fn table_changes_block_and_storm() {
    let c = costs(&[
        ("create_tag", 0, "local", 100.0),
        ("publisher", 0, "local", 300.0),
        ("subscribe", 0, "local", 200.0),
    ]);
    let set = TaskSet {
        platform: Platform {
            table_block: 0.0002,
            table_changes: 10.0,
            ..Platform::default()
        },
        task: vec![periodic("t", "n", 1, 0.01, 0.001)],
        ..TaskSet::default()
    };
    let a = analyze(&set, &c).unwrap();
    // 1 ms + 0.2 ms blocking + one 0.3 ms table change within 10 ms.
    assert!(
        (a.tasks[0].response.unwrap() - 0.0015).abs() < 1e-12,
        "{:?}",
        a.tasks[0]
    );
}

#[test]
fn bad_task_sets_and_cost_files_are_refused_with_what_is_wrong() {
    let bad = [
        ("[[task]]\nname='a'\nnode='n'\npriority=1\nwcet=0.1\n", "a period"),
        ("[[task]]\nname='a'\nnode='n'\npriority=1\nperiod=1.0\nwcet=0.1\nreceives=[{tag='/x'}]\n", "no task sends"),
        ("[[task]]\nname='a'\nnode='n'\npriority=1\nperiod=1.0\nwcet=0.1\nbogus=1\n", "unknown field"),
        ("[[flow]]\nname='f'\npath=['nobody']\n", "no task nobody"),
        ("[[task]]\nname='a'\nnode='n'\npriority=1\non='/x'\nwcet=0.1\n", "does not receive"),
        ("[platform]\nnetwork=-1.0\n", "not negative"),
    ];
    for (text, why) in bad {
        let e = TaskSet::from_toml(text).unwrap_err().to_string();
        assert!(e.contains(why), "{text}: {e}");
    }
    let e = Costs::from_json_lines("{\"call\":\"send\"}\n", CostFigure::Max).unwrap_err();
    assert!(e.to_string().starts_with("costs line 1"), "{e}");
    let line = r#"{"bench":"costs","call":"send","size":64,"where":"local","calls":1,"p50_us":1,"p999_us":2,"max_us":3,"mean_us":1}"#;
    let c = Costs::from_json_lines(&format!("{line}\n\n"), CostFigure::Max).unwrap();
    assert_eq!(c.of("send", 1, false).unwrap(), 3e-6);
    let nan = line.replace("\"max_us\":3", "\"max_us\":-3");
    assert!(Costs::from_json_lines(&nan, CostFigure::Max).is_err());
}

#[test]
fn a_periodic_task_waking_late_counts_its_wake_up_from_its_due_release() {
    // Periods 7 and 12, costs 3 and 3, every timer up to 1 late (in µs
    // in the costs: 1e6 µs = 1 s, the set's unit here). The first: 1 + 3.
    // The second: w = 3 + ⌈(w + 1) / 7⌉·3 = 6, then R = 1 + 6 = 7.
    let set = TaskSet {
        task: vec![
            periodic("t1", "n", 2, 7.0, 3.0),
            periodic("t2", "n", 1, 12.0, 3.0),
        ],
        ..TaskSet::default()
    };
    let late = costs(&[("wakeup", 0, "local", 1e6)]);
    assert_eq!(late.wakeup(), 1.0);
    let a = analyze(&set, &late).unwrap();
    let r: Vec<Option<f64>> = a.tasks.iter().map(|t| t.response).collect();
    assert_eq!(r, vec![Some(4.0), Some(7.0)]);
    // Without a wakeup record: none assumed.
    assert_eq!(Costs::default().wakeup(), 0.0);
    // Late enough that the second's window takes two of the first's
    // releases: w = 3 + ⌈(w + 4) / 7⌉·3 = 9, R = 4 + 9 = 13 > 12.
    let later = costs(&[("wakeup", 0, "local", 4e6)]);
    let a = analyze(&set, &later).unwrap();
    assert_eq!(a.tasks[0].response, Some(7.0));
    assert!(!a.tasks[1].schedulable);
    assert_eq!(a.tasks[1].overrun, Some(1.0));
}

#[test]
fn a_thread_above_a_task_preempts_it_and_one_below_does_not() {
    // The textbook's second task, with the first as a thread instead.
    let mut set = TaskSet {
        task: vec![periodic("t2", "n", 2, 12.0, 3.0)],
        thread: vec![Thread {
            name: "forwarder".into(),
            node: "n".into(),
            priority: 3,
            period: 7.0,
            cost: 3.0,
            jitter: 0.0,
        }],
        ..TaskSet::default()
    };
    let a = analyze(&set, &Costs::default()).unwrap();
    assert_eq!(a.tasks.len(), 1, "a thread is not analysed itself");
    assert_eq!(a.tasks[0].response, Some(6.0));
    set.thread[0].priority = 1;
    assert_eq!(
        analyze(&set, &Costs::default()).unwrap().tasks[0].response,
        Some(3.0)
    );
    set.thread[0].node = "m".into();
    set.thread[0].priority = 3;
    assert_eq!(
        analyze(&set, &Costs::default()).unwrap().tasks[0].response,
        Some(3.0)
    );
    set.thread[0].period = 0.0;
    assert!(analyze(&set, &Costs::default()).is_err());
}

#[test]
fn the_measured_table_hold_blocks_only_a_set_whose_tables_change() {
    let mut set = TaskSet {
        task: vec![periodic("t", "n", 1, 10.0, 3.0)],
        ..TaskSet::default()
    };
    // Holds of 1 and 2 (s, as µs in the costs); the longer counts.
    let c = costs(&[
        ("table_hold", 0, "local", 1e6),
        ("state_hold", 0, "remote", 2e6),
    ]);
    assert_eq!(c.table_hold(), 2.0);
    assert_eq!(analyze(&set, &c).unwrap().tasks[0].response, Some(3.0));
    set.platform.table_changes = 0.01;
    set.platform.table_block = 0.5;
    // Changes: B = max(0.5, 2); the storm term wants create_tag and the
    // others' costs, here none measured: give them.
    let c = costs(&[
        ("table_hold", 0, "local", 1e6),
        ("state_hold", 0, "remote", 2e6),
        ("create_tag", 0, "local", 0.0),
        ("publisher", 0, "local", 0.0),
        ("subscribe", 0, "local", 0.0),
    ]);
    let a = analyze(&set, &c).unwrap();
    assert_eq!(a.tasks[0].blocking, 2.0);
    assert_eq!(a.tasks[0].response, Some(5.0));
}
