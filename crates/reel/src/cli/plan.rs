//! `reel plan`: print the core plan the server would use, with the evidence.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use reel_runtime::core_plan::{RealSysFs, detect_nic_irqs, plan};

/// Output format of `reel plan`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    /// A human-readable table.
    Text,
    /// Shell assignments (`NICS`, `IRQ_CPUS`, `WORKER_CPUS`, `NIC_IRQS`) for reel-irq.sh.
    Env,
}

/// Runs `reel plan`.
pub(crate) fn run(path: &Path, format: Format) -> anyhow::Result<ExitCode> {
    let cfg = match reel_config::load_and_validate(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    let spec = crate::state::options::core_spec(&cfg);
    let sys = RealSysFs;
    let p = plan(&spec, &sys).context("planning cores")?;
    match format {
        Format::Text => print!("{p}"),
        Format::Env => {
            let (irqs, _) = detect_nic_irqs(&sys, &spec.nic);
            let join = |v: &[usize]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ");
            println!("NICS=\"{}\"", spec.nic.join(" "));
            println!("IRQ_CPUS=\"{}\"", join(&p.irq_cpus));
            println!("WORKER_CPUS=\"{}\"", join(&p.workers));
            let nums: Vec<String> = irqs.iter().map(|i| i.irq.to_string()).collect();
            println!("NIC_IRQS=\"{}\"", nums.join(" "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
