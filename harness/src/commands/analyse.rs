//! The commands that read results files and print what they say: `report`, `project` and
//! `compare`.

use anyhow::Result;

use super::plot::plot_notes;
use super::{load_checked, load_results, user_path};
use crate::analysis::analyze;
use crate::charts::{self, Labelled};
use crate::cli::{CompareArgs, ProjectArgs, ReportArgs};
use crate::plot::LineKind;
use crate::{compare, report};

/// `lockscale report`: one sweep's tables (and its projection).
pub fn report(a: &ReportArgs) -> Result<i32> {
    let f = load_checked(&a.file, a.workload)?;
    print!("{}", report::render(&f, a.relative_to.as_deref(), a.top)?);
    if a.project {
        print!(
            "\n## Projection\n\n{}",
            crate::project::render(&crate::project::project(&f, &a.model.options())?)
        );
    }
    Ok(0)
}

/// `lockscale project`: the model's projection of a sweep to a larger host (and its plot).
pub fn project(a: &ProjectArgs) -> Result<i32> {
    let f = load_results(&user_path(&a.file))?;
    let set = crate::project::project(&f, &a.model.options())?;
    print!(
        "# lockscale project: {}\n\n{}",
        f.name,
        crate::project::render(&set)
    );
    if let Some(o) = &a.output {
        let an = analyze(&f, None)?;
        let mut series = charts::series(
            &[Labelled {
                prefix: String::new(),
                analysis: &an,
                kind: LineKind::Solid,
            }],
            None,
        );
        series.extend(charts::projected_series("", &set));
        let out = user_path(o);
        let mut notes = plot_notes(&[&an]);
        notes.push(format!("dashed, hollow squares: projected for a host of {} cores (fitted on N ≤ {}); harness/README.md, \"Projection\"", set.cores, set.fit_max));
        charts::write_plot(
            &out,
            &series,
            &format!("lockscale: {} (measured and projected)", f.name),
            None,
            Some(f.host.logical_cores),
            notes,
        )?;
        eprintln!("lockscale: wrote {}", out.display());
    }
    Ok(0)
}

/// `lockscale compare`: two sweeps side by side with their significance (and a plot).
pub fn compare(a: &CompareArgs) -> Result<i32> {
    compare::check_alpha(a.alpha)?;
    let old = load_checked(&a.old, a.workload)?;
    let new = load_checked(&a.new, a.workload)?;
    let clock_note = crate::clock::check_mix(&old, &new, a.allow_mixed_clocks)?;
    let mut c = compare::compare(&old, &new)?;
    c.notes.extend(clock_note);
    print!("{}", compare::render_compare(&old, &new, &c, a.alpha));
    if let Some(o) = &a.output {
        let (ao, an) = (analyze(&old, None)?, analyze(&new, None)?);
        let series = charts::series(
            &[
                Labelled {
                    prefix: format!("{}: ", old.name),
                    analysis: &ao,
                    kind: LineKind::Dashed,
                },
                Labelled {
                    prefix: format!("{}: ", new.name),
                    analysis: &an,
                    kind: LineKind::Solid,
                },
            ],
            None,
        );
        let out = user_path(o);
        charts::write_plot(
            &out,
            &series,
            &format!("{} vs {}", old.name, new.name),
            None,
            Some(new.host.logical_cores),
            plot_notes(&[&ao, &an]),
        )?;
        eprintln!("lockscale: wrote {}", out.display());
    }
    Ok(0)
}
