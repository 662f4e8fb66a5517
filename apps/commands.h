// Each subcommand of the `frugal` command line lives in its own folder (train/, predict/, plan/, launch/,
// data/, bench/, plot/) and registers itself here.
#pragma once

namespace CLI { class App; }
namespace frugal::data { struct Dataset; }

namespace frugal::cli {

void add_train_command(CLI::App& app);
void add_data_command(CLI::App& app);
// stats, shuffle, split, fashion-mnist, references, gcide: under `frugal data` (data/cmd_data_tools.cpp).
void add_data_tools(CLI::App& data);
void add_data_gcide(CLI::App& data);  // data/cmd_data_gcide.cpp
void add_data_ctr(CLI::App& data);    // synth-ctr: data/cmd_data_ctr.cpp
void add_data_pack(CLI::App& data);   // pack: data/cmd_data_pack.cpp
// Prints the P@1/P@3/P@5 of the reference rankers (core/data/reference_rankers.h) on `test`.
void print_references(const data::Dataset& train, const data::Dataset& test);
// predict and evaluate: use a trained model (predict/cmd_predict.cpp).
void add_predict_command(CLI::App& app);
void add_evaluate_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_keygen_command(CLI::App& app);
// bench roofline: the machine probe and the roofline of a run's metrics (bench/cmd_bench.cpp).
void add_bench_command(CLI::App& app);
// bench comm: collectives timed over MPI and ZeroMQ under mpirun; --tune saves --transport-map auto's table.
void add_bench_comm_command(CLI::App& bench);
// bench read: a data set read whole, timed (text against packed; bench/cmd_bench_read.cpp).
void add_bench_read_command(CLI::App& bench);
// plan: the cost model's best grid for N nodes of C cores, validated on measured runs (plan/cmd_plan.cpp).
void add_plan_command(CLI::App& app);
// plot: training curves of metrics logs as PNG files, drawn by gnuplot (plot/cmd_plot.cpp).
void add_plot_command(CLI::App& app);

}  // namespace frugal::cli
