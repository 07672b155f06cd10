// scratch: evaluate generated machines (not committed)
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed: u64 = args[1].parse().unwrap();
    let from: usize = args[2].parse().unwrap();
    let to: usize = args[3].parse().unwrap();
    let mut results = Vec::new();
    for i in from..to {
        let g = irqpilot_sim::heldout::machine(seed, i).unwrap();
        let t = std::time::Instant::now();
        let r = irqpilot_sim::targets::evaluate(&g).unwrap();
        let fails: Vec<String> = r.values.iter().filter(|(t, v)| !t.pass(**v)).map(|(t, v)| format!("{}={:.3}", t.name(), v)).collect();
        println!("{} {:.1}s {} | {:?} reach {:?} | FAIL {:?}", r.name, t.elapsed().as_secs_f64(), r.description, r.values.iter().map(|(t,v)| format!("{}={:.3}", t.name(), v)).collect::<Vec<_>>(), r.reachable, fails);
        results.push(r);
    }
    println!("{}", irqpilot_sim::targets::markdown(&irqpilot_sim::targets::summarize(&results)));
}
