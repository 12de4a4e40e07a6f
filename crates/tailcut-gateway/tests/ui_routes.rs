//! `/ui` lists, for each route, the providers its policy launches: the shipped example's
//! jobs route (a cutover from `runpod` to `cerebrium`) must not list the chat providers
//! its hedger merely could reach.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

#[tokio::test]
async fn the_status_page_lists_only_the_providers_a_route_s_policy_uses() {
    let example = include_str!("../../../examples/serve-sim.toml");
    let chat_url = common::serve_config(example).await;
    let base = chat_url.trim_end_matches("/v1/chat/completions");
    let page = reqwest::get(format!("{base}/ui")).await.unwrap().text().await.unwrap();
    let row = |route: &str| {
        let at = page.find(&format!("<td>{route}</td>")).unwrap_or_else(|| panic!("no row for {route}:\n{page}"));
        let end = page[at..].find("</tr>").map_or(page.len(), |e| at + e);
        page[at..end].to_string()
    };
    let jobs = row("sim-jobs");
    assert!(jobs.contains("runpod, cerebrium"), "{jobs}");
    assert!(!jobs.contains("chat-a") && !jobs.contains("chat-b"), "the jobs route lists providers its policy never launches: {jobs}");
    let chat = row("sim-chat");
    assert!(chat.contains("chat-a, chat-b") && !chat.contains("runpod"), "{chat}");
}
