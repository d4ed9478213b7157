//! Hand-computed expectations of the retention rules, and properties of the policy against a
//! model of one count rule (proptest).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashSet};

use arca_format::{Id, Snapshot, SnapshotSummary};
use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;

use super::buckets::Period;
use super::*;

fn snap(time: DateTime<FixedOffset>, host: &str, paths: &[&str], tags: &[&str]) -> Snapshot {
    Snapshot {
        time,
        tree: Id::default(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        hostname: host.into(),
        username: "u".into(),
        uid: 1,
        gid: 1,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        parent: None,
        original: None,
        copied_tree: None,
        program_version: "arca test".into(),
        complete: true,
        summary: SnapshotSummary::default(),
    }
}

/// A distinct id from a number.
fn id(n: u64) -> Id {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&n.to_le_bytes());
    b[31] = 1;
    Id(b)
}

/// `2023-01-02 03:04:05` at offset `off_h` hours.
fn at(s: &str, off_h: i32) -> DateTime<FixedOffset> {
    let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
    FixedOffset::east_opt(off_h * 3600)
        .unwrap()
        .from_local_datetime(&naive)
        .single()
        .unwrap()
}

/// Snapshots of host `h` and path `/p` at `times`, ids `id(0)`, `id(1)`, ...
fn list(times: &[DateTime<FixedOffset>]) -> Vec<(Id, Snapshot)> {
    times
        .iter()
        .enumerate()
        .map(|(i, t)| (id(i as u64), snap(*t, "h", &["/p"], &[])))
        .collect()
}

/// [`list`] of UTC times written `YYYY-MM-DD HH:MM:SS`.
fn utc(times: &[&str]) -> Vec<(Id, Snapshot)> {
    list(&times.iter().map(|t| at(t, 0)).collect::<Vec<_>>())
}

/// [`list`] of `n` times `step` apart from `start` (UTC), oldest first.
fn every(start: &str, step: TimeDelta, n: i32) -> Vec<(Id, Snapshot)> {
    let start = at(start, 0);
    list(&(0..n).map(|i| start + step * i).collect::<Vec<_>>())
}

/// Every day of 2023 at 12:00 UTC: 365 snapshots, oldest first.
fn daily_2023() -> Vec<(Id, Snapshot)> {
    every("2023-01-01 12:00:00", TimeDelta::days(1), 365)
}

/// Every hour of 2023 (UTC): 8760 snapshots.
fn hourly_2023() -> Vec<(Id, Snapshot)> {
    every("2023-01-01 00:00:00", TimeDelta::hours(1), 8760)
}

/// Snapshots `id(1)`, `id(2)`, ... at midnight UTC on 1, 2, ... January 2024, each of a host,
/// paths and tags.
fn january(snaps: &[(&str, &[&str], &[&str])]) -> Vec<(Id, Snapshot)> {
    snaps
        .iter()
        .zip(1u64..)
        .map(|((host, paths, tags), n)| {
            let time = at(&format!("2024-01-{n:02} 00:00:00"), 0);
            (id(n), snap(time, host, paths, tags))
        })
        .collect()
}

fn far_future() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).unwrap()
}

/// The times of the kept snapshots, newest first, as `YYYY-MM-DD HH:MM:SS`.
fn kept(policy: &Policy, l: &[(Id, Snapshot)]) -> Vec<String> {
    let by_id: BTreeMap<Id, &Snapshot> = l.iter().map(|(i, s)| (*i, s)).collect();
    apply(policy, l, far_future())
        .iter()
        .filter(|d| d.keep)
        .map(|d| by_id[&d.id].time.format("%Y-%m-%d %H:%M:%S").to_string())
        .collect()
}

fn policy(f: impl FnOnce(&mut Policy)) -> Policy {
    let mut p = Policy::default();
    f(&mut p);
    p
}

/// The count rules of `p`: last, hourly, daily, weekly, monthly, yearly.
fn counts_mut(p: &mut Policy) -> [&mut i32; 6] {
    [
        &mut p.last,
        &mut p.hourly,
        &mut p.daily,
        &mut p.weekly,
        &mut p.monthly,
        &mut p.yearly,
    ]
}

/// The span rules of `p`: within, within_hourly, ..., within_yearly.
fn spans_mut(p: &mut Policy) -> [&mut CalendarDuration; 6] {
    [
        &mut p.within,
        &mut p.within_hourly,
        &mut p.within_daily,
        &mut p.within_weekly,
        &mut p.within_monthly,
        &mut p.within_yearly,
    ]
}

#[test]
fn durations_parse_and_print() {
    let d: CalendarDuration = "1y2m3d4h".parse().unwrap();
    assert_eq!(
        d,
        CalendarDuration {
            years: 1,
            months: 2,
            days: 3,
            hours: 4
        }
    );
    assert_eq!(d.to_string(), "1y2m3d4h");
    assert_eq!(
        "4h2d".parse::<CalendarDuration>().unwrap().to_string(),
        "2d4h"
    );
    assert_eq!(" 30d ".parse::<CalendarDuration>().unwrap().days, 30);
    assert!("0d".parse::<CalendarDuration>().unwrap().is_zero());
    for bad in ["", "d", "5", "5x", "1d2d", "-1d", "1.5d", "99999999999d"] {
        assert!(bad.parse::<CalendarDuration>().is_err(), "{bad}");
    }
    assert_eq!(parse_count("unlimited").unwrap(), -1);
    assert_eq!(parse_count("-1").unwrap(), -1);
    assert_eq!(parse_count("7").unwrap(), 7);
    assert!(parse_count("-2").is_err());
    assert!(parse_count("many").is_err());
    // restic takes any 64-bit count: one past i32 keeps as many as there are (it was refused
    // as "expected a number of at least 0").
    assert_eq!(parse_count("99999999999").unwrap(), i32::MAX);
    assert_eq!(parse_count("2147483647").unwrap(), i32::MAX);
    assert!(parse_count("-99999999999").is_err());
}

#[test]
fn calendar_arithmetic_follows_go_add_date() {
    // 31 March less a month is "31 February": 2 March in a leap year, 3 March otherwise.
    for (span, from, want) in [
        ("1m", "2024-03-31 12:00:00", "2024-03-02 12:00:00 +0200"),
        ("1m", "2023-03-31 12:00:00", "2023-03-03 12:00:00 +0200"),
        ("1y", "2024-02-29 00:00:00", "2023-03-01 00:00:00 +0200"),
        ("2d5h", "2024-01-01 03:00:00", "2023-12-29 22:00:00 +0200"),
        ("14m", "2024-01-15 00:00:00", "2022-11-15 00:00:00 +0200"),
    ] {
        let d: CalendarDuration = span.parse().unwrap();
        let got = d.before(&at(from, 2)).unwrap();
        assert_eq!(
            got.format("%Y-%m-%d %H:%M:%S %z").to_string(),
            want,
            "{from} less {span}"
        );
    }
}

#[test]
fn empty_policy_keeps_everything() {
    let p = Policy::default();
    assert!(p.is_empty());
    assert_eq!(p.to_string(), "keep all snapshots (no policy)");
    let l = daily_2023();
    let d = apply(&p, &l, far_future());
    assert_eq!(d.len(), 365);
    assert!(d.iter().all(|d| d.keep && d.reasons == ["policy is empty"]));
    assert!(apply(&p, &[], far_future()).is_empty());
    let p = policy(|p| p.daily = 3);
    assert!(!p.is_empty());
    assert!(apply(&p, &[], far_future()).is_empty());
}

#[test]
fn keep_last() {
    let l = daily_2023();
    let p = policy(|p| p.last = 3);
    assert_eq!(
        kept(&p, &l),
        [
            "2023-12-31 12:00:00",
            "2023-12-30 12:00:00",
            "2023-12-29 12:00:00"
        ]
    );
    let d = apply(&p, &l, far_future());
    assert_eq!(d[0].reasons, ["last snapshot"]);
    assert_eq!(d[0].counters.last, 2);
    assert_eq!(d[2].counters.last, 0);
    assert!(d[3].reasons.is_empty() && !d[3].keep);
    // More than there are: all kept, none as "oldest" (every snapshot is its own bucket).
    let p = policy(|p| p.last = 1000);
    let d = apply(&p, &l, far_future());
    assert!(d.iter().all(|d| d.keep && d.reasons == ["last snapshot"]));
}

#[test]
fn a_year_of_daily_snapshots() {
    let l = daily_2023();
    let count = |p: Policy| kept(&p, &l).len();
    assert_eq!(count(policy(|p| p.daily = 7)), 7);
    assert_eq!(count(policy(|p| p.daily = 365)), 365);
    assert_eq!(count(policy(|p| p.daily = 400)), 365);
    assert_eq!(count(policy(|p| p.daily = UNLIMITED)), 365);
    // 31 December 2023 is a Sunday: ISO weeks end on Sundays.
    assert_eq!(
        kept(&policy(|p| p.weekly = 4), &l),
        [
            "2023-12-31 12:00:00",
            "2023-12-24 12:00:00",
            "2023-12-17 12:00:00",
            "2023-12-10 12:00:00"
        ]
    );
    // 1 January 2023 (a Sunday) is in ISO week 52 of 2022: 53 weeks have snapshots.
    assert_eq!(count(policy(|p| p.weekly = 53)), 53);
    assert_eq!(count(policy(|p| p.weekly = UNLIMITED)), 53);
    // Month ends, and the oldest snapshot once counts are left over.
    let months = kept(&policy(|p| p.monthly = 12), &l);
    assert_eq!(months.len(), 12);
    assert_eq!(months[1], "2023-11-30 12:00:00");
    assert_eq!(months[10], "2023-02-28 12:00:00");
    assert_eq!(months[11], "2023-01-31 12:00:00");
    let p = policy(|p| p.monthly = 13);
    let months = kept(&p, &l);
    assert_eq!(months.len(), 13);
    assert_eq!(months[12], "2023-01-01 12:00:00");
    let d = apply(&p, &l, far_future());
    assert_eq!(d[364].reasons, ["oldest monthly snapshot"]);
    assert_eq!(d[364].counters.monthly, 0);
    assert_eq!(d[0].reasons, ["monthly snapshot"]);
    assert_eq!(count(policy(|p| p.monthly = UNLIMITED)), 13);
    assert_eq!(kept(&policy(|p| p.yearly = 1), &l), ["2023-12-31 12:00:00"]);
    assert_eq!(
        kept(&policy(|p| p.yearly = 5), &l),
        ["2023-12-31 12:00:00", "2023-01-01 12:00:00"]
    );
}

#[test]
fn a_year_of_hourly_snapshots() {
    let l = hourly_2023();
    let count = |p: Policy| kept(&p, &l).len();
    assert_eq!(count(policy(|p| p.hourly = 24)), 24);
    assert_eq!(count(policy(|p| p.hourly = UNLIMITED)), 8760);
    let days = kept(&policy(|p| p.daily = 30), &l);
    assert_eq!(days.len(), 30);
    assert!(days.iter().all(|t| t.ends_with("23:00:00")));
    assert_eq!(days[29], "2023-12-02 23:00:00");
    // 24 hours of the last day, and the 6 days before it: the newest hour counts for both.
    let p = policy(|p| {
        p.hourly = 24;
        p.daily = 7;
    });
    assert_eq!(count(p.clone()), 30);
    let d = apply(&p, &l, far_future());
    assert_eq!(d[0].reasons, ["hourly snapshot", "daily snapshot"]);
    assert_eq!(d[1].reasons, ["hourly snapshot"]);
    assert_eq!(d[24].reasons, ["daily snapshot"]);
    // Unlimited daily: 365 day ends and the very first hour.
    assert_eq!(count(policy(|p| p.daily = UNLIMITED)), 366);
    // The usual 7 daily, 4 weekly, 12 monthly, 2 yearly, hand-counted: days 31.12 to
    // 25.12; weeks ending 31.12 (same), 24.12, 17.12, 10.12; months ending 31.12 (same),
    // 30.11, ..., 31.1 (11 more); years: 31.12 (same), then counts left: 1.1 00:00.
    let p = policy(|p| {
        p.daily = 7;
        p.weekly = 4;
        p.monthly = 12;
        p.yearly = 2;
    });
    assert_eq!(count(p), 7 + 3 + 11 + 1);
}

#[test]
fn bucket_boundaries() {
    // 23:59:59 and 00:00:00 are different days, hours, and here years; 1 January 2023 is
    // still in ISO week 2022-W52, 2 January 2023 starts 2023-W01.
    let l = utc(&[
        "2022-12-31 23:59:59",
        "2023-01-01 00:00:00",
        "2023-01-01 23:59:59",
        "2023-01-02 00:00:00",
    ]);
    let k = |p: Policy| kept(&p, &l);
    assert_eq!(
        k(policy(|p| p.daily = UNLIMITED)),
        [
            "2023-01-02 00:00:00",
            "2023-01-01 23:59:59",
            "2022-12-31 23:59:59"
        ]
    );
    assert_eq!(k(policy(|p| p.hourly = UNLIMITED)).len(), 4);
    assert_eq!(
        k(policy(|p| p.weekly = 2)),
        ["2023-01-02 00:00:00", "2023-01-01 23:59:59"]
    );
    assert_eq!(
        k(policy(|p| p.yearly = 2)),
        ["2023-01-02 00:00:00", "2022-12-31 23:59:59"]
    );
    assert_eq!(k(policy(|p| p.monthly = 1)), ["2023-01-02 00:00:00"]);
    // Buckets are read in each snapshot's own offset: 23:30 UTC on 1 March and 00:30:01 on
    // 2 March at +01:00 are a second apart but on different days (in UTC the older one
    // would only be kept as the "oldest daily snapshot").
    let l = list(&[at("2024-03-01 23:30:00", 0), at("2024-03-02 00:30:01", 1)]);
    let d = apply(&policy(|p| p.daily = 2), &l, far_future());
    assert_eq!(d[0].reasons, ["daily snapshot"]);
    assert_eq!(d[1].reasons, ["daily snapshot"]);
}

#[test]
fn keep_within() {
    let l = utc(&[
        "2024-03-08 12:00:00",
        "2024-03-08 12:00:01",
        "2024-03-09 00:00:00",
        "2024-03-10 12:00:00",
    ]);
    let p = policy(|p| p.within = "2d".parse().unwrap());
    // Strictly newer than 2 days before the newest.
    assert_eq!(kept(&p, &l).len(), 3);
    let d = apply(&p, &l, far_future());
    assert_eq!(d[0].reasons, ["within 2d"]);
    assert!(!d[3].keep);
    // Months by the calendar: 31 March less 1m is 2 March in 2024.
    let l = utc(&[
        "2024-03-01 12:00:00",
        "2024-03-02 12:00:00",
        "2024-03-02 12:00:01",
        "2024-03-31 12:00:00",
    ]);
    let p = policy(|p| p.within = "1m".parse().unwrap());
    assert_eq!(kept(&p, &l), ["2024-03-31 12:00:00", "2024-03-02 12:00:01"]);
    // Relative to the newest snapshot, not now: a year of dailies within 1y keeps all.
    let p = policy(|p| p.within = "1y".parse().unwrap());
    assert_eq!(kept(&p, &daily_2023()).len(), 365);
}

#[test]
fn future_snapshots_do_not_count_as_newest() {
    let l = utc(&[
        "2024-01-01 00:00:00",
        "2024-01-05 00:00:00",
        "2030-01-01 00:00:00",
    ]);
    let now = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
    let p = policy(|p| p.within = "2d".parse().unwrap());
    let keep: Vec<bool> = apply(&p, &l, now).iter().map(|d| d.keep).collect();
    assert_eq!(keep, [true, true, false]);
    // All in the future: there is no newest, everything is within.
    let now = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap();
    assert!(apply(&p, &l, now).iter().all(|d| d.keep));
}

#[test]
fn keep_within_buckets() {
    let l = hourly_2023();
    // Within 3d of 31.12 23:00 is after 28.12 23:00: the day ends of 29.12 to 31.12. The
    // group's oldest snapshot (1.1) is not within, so it is not kept.
    let p = policy(|p| p.within_daily = "3d".parse().unwrap());
    assert_eq!(
        kept(&p, &l),
        [
            "2023-12-31 23:00:00",
            "2023-12-30 23:00:00",
            "2023-12-29 23:00:00"
        ]
    );
    let d = apply(&p, &l, far_future());
    assert_eq!(d[0].reasons, ["daily within 3d"]);
    // A whole group within: the oldest snapshot is kept as well.
    let short = utc(&[
        "2023-05-01 01:00:00",
        "2023-05-01 02:00:00",
        "2023-05-02 01:00:00",
    ]);
    let d = apply(&p, &short, far_future());
    assert_eq!(d[0].reasons, ["daily within 3d"]);
    assert_eq!(d[1].reasons, ["daily within 3d"]);
    assert_eq!(d[2].reasons, ["oldest daily within 3d"]);
    let p = policy(|p| p.within_monthly = "1y".parse().unwrap());
    // A year before 31.12 23:00 is 31.12.2022 23:00: every hour of 2023 is within, so the
    // 12 month ends and the oldest snapshot (1.1 00:00) are kept.
    assert_eq!(kept(&p, &l).len(), 13);
    let p = policy(|p| p.within_hourly = "5h".parse().unwrap());
    assert_eq!(kept(&p, &l).len(), 5);
}

#[test]
fn keep_tags() {
    let l = january(&[
        ("h", &["/p"], &["keep"]),
        ("h", &["/p"], &["a", "b"]),
        ("h", &["/p"], &["a"]),
        ("h", &["/p"], &[]),
    ]);
    let p = policy(|p| p.tags = vec![vec!["keep".into()], vec!["a".into(), "b".into()]]);
    let d = apply(&p, &l, far_future());
    let ids: Vec<(Id, bool)> = d.iter().map(|d| (d.id, d.keep)).collect();
    assert_eq!(
        ids,
        [(id(4), false), (id(3), false), (id(2), true), (id(1), true)]
    );
    assert_eq!(d[2].reasons, ["has tags [a, b]"]);
    assert_eq!(d[3].reasons, ["has tags [keep]"]);
    let p = policy(|p| {
        p.tags = vec![vec!["keep".into()]];
        p.last = 1;
    });
    assert_eq!(
        p.to_string(),
        "keep 1 latest snapshots and all snapshots with tags [keep]"
    );
    let d = apply(&p, &l, far_future());
    assert_eq!(d[0].reasons, ["last snapshot"]);
    assert!(!d[1].keep && !d[2].keep);
    assert_eq!(d[3].reasons, ["has tags [keep]"]);
}

#[test]
fn policy_text_and_validation() {
    let p = policy(|p| {
        p.last = 3;
        p.daily = 7;
        p.monthly = UNLIMITED;
        p.within_daily = "1m".parse().unwrap();
        p.within = "2d".parse().unwrap();
    });
    assert_eq!(
        p.to_string(),
        "keep 3 latest, 7 daily, all monthly snapshots, daily snapshots within 1m and all snapshots within 2d of the newest"
    );
    assert!(p.validate().is_ok());
    assert!(policy(|p| p.weekly = -2).validate().is_err());
    assert!(policy(|p| p.tags = vec![vec![]]).validate().is_err());
    assert!(policy(|p| p.within.days = -1).validate().is_err());
}

#[test]
fn grouping() {
    let l = january(&[
        ("b", &["/y", "/x"], &["t2", "t1"]),
        ("a", &["/x", "/y"], &[]),
        ("b", &["/x", "/y"], &["t1"]),
        ("b", &["/z"], &["t1", "t2"]),
    ]);
    let ids = |gs: &[Group]| -> Vec<Vec<Id>> {
        gs.iter()
            .map(|g| g.snapshots.iter().map(|(i, _)| *i).collect())
            .collect()
    };
    let g = group(l.clone(), GroupBy::default());
    assert_eq!(ids(&g), [vec![id(2)], vec![id(1), id(3)], vec![id(4)]]);
    assert_eq!(g[1].key.to_string(), "host [b], paths [/x, /y]");
    assert_eq!(g[1].key.tags, None);
    let g = group(l.clone(), "tags".parse().unwrap());
    assert_eq!(ids(&g), [vec![id(2)], vec![id(3)], vec![id(1), id(4)]]);
    assert_eq!(g[2].key.to_string(), "tags [t1, t2]");
    let g = group(l.clone(), "host,paths,tags".parse().unwrap());
    assert_eq!(g.len(), 4);
    let g = group(l.clone(), "".parse().unwrap());
    assert_eq!(ids(&g), [vec![id(1), id(2), id(3), id(4)]]);
    assert_eq!(g[0].key.to_string(), "all snapshots");
    assert!("host,colour".parse::<GroupBy>().is_err());
    assert_eq!(
        "hosts, path".parse::<GroupBy>().unwrap(),
        GroupBy::default()
    );
    assert_eq!(GroupBy::default().to_string(), "host,paths");
}

/// The model of one count rule: the newest snapshot of each of the `n` most recent
/// buckets, and the oldest snapshot when fewer than `n` buckets have snapshots.
fn model(
    times: &[DateTime<FixedOffset>],
    n: i32,
    bucket: impl Fn(usize) -> i64,
) -> BTreeSet<usize> {
    // `times` is sorted newest first.
    let mut seen = vec![];
    let mut keep = BTreeSet::new();
    for i in 0..times.len() {
        let b = bucket(i);
        if !seen.contains(&b) {
            seen.push(b);
            if n < 0 || seen.len() <= n as usize {
                keep.insert(i);
            }
        }
    }
    if !times.is_empty() && (n < 0 || seen.len() < n as usize) {
        keep.insert(times.len() - 1);
    }
    keep
}

fn arb_times() -> impl Strategy<Value = (Vec<DateTime<FixedOffset>>, i32)> {
    (
        proptest::collection::btree_set(1_600_000_000i64..1_700_000_000, 0..60),
        -12i32..=14,
    )
        .prop_map(|(secs, off)| {
            let o = FixedOffset::east_opt(off * 3600).unwrap();
            let mut v: Vec<_> = secs
                .into_iter()
                .map(|s| DateTime::from_timestamp(s, 0).unwrap().with_timezone(&o))
                .collect();
            v.reverse();
            (v, off)
        })
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    let count = prop_oneof![Just(0), Just(UNLIMITED), 1i32..8];
    let span = prop_oneof![
        Just(CalendarDuration::default()),
        (0i32..2, 0i32..13, 0i32..40, 0i32..48).prop_map(|(years, months, days, hours)| {
            CalendarDuration {
                years,
                months,
                days,
                hours,
            }
        })
    ];
    (
        proptest::collection::vec(count, 6),
        proptest::collection::vec(span, 6),
        proptest::collection::vec(proptest::collection::vec("[ab]", 1..3), 0..2),
    )
        .prop_map(|(c, s, tags)| {
            let mut p = Policy {
                tags,
                ..Policy::default()
            };
            for (field, n) in counts_mut(&mut p).into_iter().zip(c) {
                *field = n;
            }
            for (field, d) in spans_mut(&mut p).into_iter().zip(s) {
                *field = d;
            }
            p
        })
}

/// The policies of single rules whose union is `p`.
fn single_rules(p: &Policy) -> Vec<Policy> {
    let mut p = p.clone();
    let mut v = vec![];
    for i in 0..6 {
        let mut count = Policy::default();
        *counts_mut(&mut count)[i] = *counts_mut(&mut p)[i];
        let mut span = Policy::default();
        *spans_mut(&mut span)[i] = *spans_mut(&mut p)[i];
        v.extend([count, span]);
    }
    v.retain(|r| !r.is_empty());
    v.extend(p.tags.iter().map(|l| Policy {
        tags: vec![l.clone()],
        ..Policy::default()
    }));
    v
}

fn with_tags(times: &[DateTime<FixedOffset>]) -> Vec<(Id, Snapshot)> {
    times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let tags: &[&str] = match i % 4 {
                0 => &[],
                1 => &["a"],
                2 => &["b"],
                _ => &["a", "b"],
            };
            (id(i as u64), snap(*t, "h", &["/p"], tags))
        })
        .collect()
}

fn kept_ids(p: &Policy, l: &[(Id, Snapshot)]) -> HashSet<Id> {
    apply(p, l, far_future())
        .into_iter()
        .filter(|d| d.keep)
        .map(|d| d.id)
        .collect()
}

proptest! {
    #[test]
    fn count_rules_match_the_model((times, _off) in arb_times(), n in prop_oneof![Just(UNLIMITED), 1i32..10], rule in 0usize..6) {
        let l = list(&times);
        let mut p = Policy::default();
        let period = [None, Some(Period::Hour), Some(Period::Day), Some(Period::Week), Some(Period::Month), Some(Period::Year)][rule];
        *counts_mut(&mut p)[rule] = n;
        let d = apply(&p, &l, far_future());
        // `times` is newest first, as the decisions: decision i is snapshot id(i).
        let kept: BTreeSet<usize> = d.iter().enumerate().filter(|(_, d)| d.keep).map(|(i, _)| i).collect();
        let want = model(&times, n, |i| period.map_or(i as i64, |p| p.bucket(&times[i])));
        prop_assert_eq!(kept, want);
        prop_assert_eq!(d.len(), times.len());
        for (i, dec) in d.iter().enumerate() {
            prop_assert_eq!(dec.id, id(i as u64));
        }
    }

    #[test]
    fn a_policy_keeps_the_union_of_its_rules((times, _off) in arb_times(), p in arb_policy()) {
        let l = with_tags(&times);
        let all = kept_ids(&p, &l);
        if p.is_empty() {
            prop_assert_eq!(all.len(), l.len());
        } else {
            let union: HashSet<Id> = single_rules(&p).iter().flat_map(|r| kept_ids(r, &l)).collect();
            prop_assert_eq!(all, union);
        }
        // Every snapshot is decided once; kept ones have reasons, removed ones none.
        let d = apply(&p, &l, far_future());
        prop_assert_eq!(d.len(), l.len());
        prop_assert_eq!(d.iter().map(|d| d.id).collect::<HashSet<_>>().len(), l.len());
        prop_assert!(d.iter().all(|d| d.keep != d.reasons.is_empty()));
    }

    #[test]
    fn more_counts_never_keep_less((times, _off) in arb_times(), p in arb_policy(), rule in 0usize..6) {
        // An empty policy removes nothing (it keeps every snapshot): a count added to it
        // keeps less. The property holds between policies (a rare draw failed in a run).
        prop_assume!(!p.is_empty());
        let l = with_tags(&times);
        let mut more = p.clone();
        let c = counts_mut(&mut more);
        if *c[rule] >= 0 {
            *c[rule] += 1;
        }
        prop_assert!(kept_ids(&p, &l).is_subset(&kept_ids(&more, &l)));
    }

    #[test]
    fn keep_within_is_a_time_window((times, _off) in arb_times(), days in 1i32..400) {
        let l = list(&times);
        let span = CalendarDuration { days, ..Default::default() };
        let p = Policy { within: span, ..Default::default() };
        let d = apply(&p, &l, far_future());
        if let Some(newest) = times.first() {
            let th = *newest - TimeDelta::days(i64::from(days));
            for (i, dec) in d.iter().enumerate() {
                prop_assert_eq!(dec.keep, times[i] > th);
            }
        }
    }
}
