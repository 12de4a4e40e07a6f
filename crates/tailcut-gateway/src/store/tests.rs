//! The job store on SQLite: restarts, orphans, owners, old stores.

use super::*;

#[tokio::test]
async fn restart_marks_running_jobs_interrupted_and_keeps_finished_ones() {
    let dir = std::env::temp_dir().join(format!("tailcut-store-{}", std::process::id()));
    let path = dir.join("jobs.sqlite");
    {
        let s = JobStore::open(Some(&path)).unwrap();
        s.insert("a", "r", "t").await.unwrap();
        s.insert("b", "r", "t").await.unwrap();
        s.finish("b", "succeeded", Some(&json!({"x": 1})), Some("p"), None, None).await.unwrap();
    }
    let s = JobStore::open(Some(&path)).unwrap();
    assert_eq!(s.mark_interrupted().unwrap().0, 1);
    assert_eq!(s.get("a").await.unwrap().unwrap().state, "interrupted");
    assert_eq!(s.get("b").await.unwrap().unwrap().result, Some(json!({"x": 1})));
    assert_eq!(s.cleanup(Duration::ZERO).await.unwrap(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_restart_returns_the_provider_jobs_its_predecessor_left_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    {
        let s = JobStore::open(Some(&path)).unwrap();
        s.insert("a", "r", "t").await.unwrap();
        s.record_attempt("a", 0, "runpod", Some("rp-1")).await.unwrap();
        s.record_attempt("a", 1, "fal", Some("fal-9")).await.unwrap();
        s.insert("b", "r", "t").await.unwrap();
        s.record_attempt("b", 0, "runpod", Some("rp-2")).await.unwrap();
        s.finish("b", "succeeded", None, Some("runpod"), None, None).await.unwrap();
    }
    let s = JobStore::open(Some(&path)).unwrap();
    let (n, orphans) = s.mark_interrupted().unwrap();
    assert_eq!(n, 1);
    let ids: Vec<(&str, &str)> = orphans.iter().map(|o| (o.provider.as_str(), o.provider_job_id.as_str())).collect();
    assert_eq!(ids, [("runpod", "rp-1"), ("fal", "fal-9")], "only the interrupted job's attempts");
    s.set_orphan_receipts("a", &json!([{"job_id": "rp-1"}])).await.unwrap();
    assert_eq!(s.get("a").await.unwrap().unwrap().to_json()["receipts"][0]["job_id"], "rp-1");
    // A late finish of a job already interrupted does not overwrite it.
    s.finish("a", "succeeded", None, None, None, None).await.unwrap();
    assert_eq!(s.get("a").await.unwrap().unwrap().state, "interrupted");
}

#[tokio::test]
async fn a_job_is_readable_only_by_its_owner() {
    let s = JobStore::open(None).unwrap();
    s.insert("j", "r", "alice").await.unwrap();
    assert_eq!(s.get_owned("j", "alice").await.unwrap().unwrap().owner.as_deref(), Some("alice"));
    assert_eq!(s.get_owned("j", "bob").await.unwrap(), None);
    assert_eq!(s.get_owned("missing", "alice").await.unwrap(), None);
}

#[tokio::test]
async fn a_store_from_before_owners_gains_the_column_and_its_jobs_stay_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, route TEXT NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,
             finished_ms INTEGER, result TEXT, winner TEXT, trace TEXT, error TEXT);
             INSERT INTO jobs (id, route, state, created_ms) VALUES ('old', 'r', 'succeeded', 1);",
        )
        .unwrap();
    }
    let s = JobStore::open(Some(&path)).unwrap();
    assert_eq!(s.get("old").await.unwrap().unwrap().owner, None);
    assert_eq!(s.get_owned("old", "anonymous").await.unwrap(), None);
    s.insert("new", "r", "alice").await.unwrap();
    assert!(s.get_owned("new", "alice").await.unwrap().is_some());
}
