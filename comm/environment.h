// The environment variables of a run, each named once: `frugal launch` (apps/launch/launcher.cpp) writes
// them for every rank it starts and comm::init (comm/init.cpp) reads them. A person starting ranks
// by hand sets them the same way (README.md, comm/README.md, where shell scripts and documentation
// spell the names out). Flags of comm::init(argc, argv) win over them.
#pragma once

#include <string_view>

namespace frugal::comm::env {

// zmq, mpi or local: the backend, instead of init's own choice (mpirun -> MPI, FRUGAL_SIZE -> ZeroMQ).
inline constexpr std::string_view kTransport = "FRUGAL_TRANSPORT";
// The number of ranks of a ZeroMQ run (--size); set, it makes init choose ZeroMQ.
inline constexpr std::string_view kSize = "FRUGAL_SIZE";
// This process's rank, 0..size-1 (--rank).
inline constexpr std::string_view kRank = "FRUGAL_RANK";
// host:port that rank 0 binds and the other ranks dial (--coordinator).
inline constexpr std::string_view kCoordinator = "FRUGAL_COORDINATOR";
// The CURVE key file made by `frugal keygen` (--cluster-key); on every rank or none.
inline constexpr std::string_view kClusterKey = "FRUGAL_CLUSTER_KEY";
// Without a cluster key: a secret the ranks of one run share (--run-token; ZmqOptions::run_token), so
// that only processes that know it can connect to a rank. `frugal launch` makes a new one for every
// launch unless this is set already or a cluster key is used; on every rank or none.
inline constexpr std::string_view kRunToken = "FRUGAL_RUN_TOKEN";
// Seconds of silence after which a peer is declared dead (--comm-timeout; default
// kDefaultCommTimeoutSeconds). comm::comm_timeout_seconds (comm/init.h) reads it for everyone.
inline constexpr std::string_view kCommTimeout = "FRUGAL_COMM_TIMEOUT";
inline constexpr double kDefaultCommTimeoutSeconds = 30.0;
// An mpirun job: the transport of each kind of operation, e.g. all_reduce=mpi,all_gather=zmq,p2p=zmq
// (--transport-map; comm/transport_map.h). Naming zmq opens the ZeroMQ mesh beside MPI. Unset: MPI only.
inline constexpr std::string_view kTransportMap = "FRUGAL_TRANSPORT_MAP";
// --transport-map auto: the table of `frugal bench comm --tune` (--transport-table; default
// $HOME/.frugal/transport-table.json, comm/transport_table.h).
inline constexpr std::string_view kTransportTable = "FRUGAL_TRANSPORT_TABLE";
// Seconds start-up waits for every rank to join (default 120).
inline constexpr std::string_view kRendezvousTimeout = "FRUGAL_RENDEZVOUS_TIMEOUT";
// The address this rank listens on for its peers (default: the local address facing the coordinator).
inline constexpr std::string_view kBindHost = "FRUGAL_BIND_HOST";
// The largest message part (a frame's payload) a rank accepts from a socket, in bytes (default
// 1 GiB, kDefaultMaxMessageBytes in comm/zmq_communicator.h; every rank should use the same). A peer
// that sends a larger one is disconnected by ZeroMQ (ZMQ_MAXMSGSIZE) before it is allocated, so a
// stranger cannot make a rank allocate without bound; a rank refuses to send one. Legitimate frames
// are far smaller: collectives cut their data into segments (CollectiveTuning::segment_bytes).
inline constexpr std::string_view kMaxMessageBytes = "FRUGAL_MAX_MESSAGE_BYTES";
// How many times `frugal launch --max-restarts` has restarted the whole job (0 on the first start);
// `frugal train` records it in its epoch lines. Not read by comm::init.
inline constexpr std::string_view kRestartCount = "FRUGAL_RESTART_COUNT";
// Ranks `frugal launch` started on this host (it starts all of them on one): `--threads 0` gives each
// rank its share of the cores (train/run/rank_threads.h). Not read by comm::init.
inline constexpr std::string_view kLocalSize = "FRUGAL_LOCAL_SIZE";
// Not ours: Open MPI's count of the ranks on this host, read for the same purpose.
inline constexpr std::string_view kMpiLocalSize = "OMPI_COMM_WORLD_LOCAL_SIZE";
// The most bytes of frames received from one peer that a rank holds before an operation takes them
// (default 1 GiB, kDefaultMaxQueuedBytes in comm/zmq_communicator.h; at least one largest message is
// always admitted). A peer past it, running far ahead or flooding the rank with frames no operation
// asks for, fails the run with an error naming it, instead of making the rank allocate without bound.
inline constexpr std::string_view kMaxQueuedBytes = "FRUGAL_MAX_QUEUED_BYTES";
// Not ours: Open MPI sets it in every process mpirun starts, which is how init recognizes an MPI run.
inline constexpr std::string_view kMpiWorldSize = "OMPI_COMM_WORLD_SIZE";
// The port rank 0 listens on when the coordinator's host comes from Slurm's node list (default
// comm::slurm::kDefaultCoordinatorPort, 29500); FRUGAL_COORDINATOR, when set, wins over both.
inline constexpr std::string_view kCoordinatorPort = "FRUGAL_COORDINATOR_PORT";

// Not ours: Slurm sets these in every task `srun` starts (comm/slurm.h). With FRUGAL_RANK and
// FRUGAL_SIZE unset, init takes the rank and size from them and the coordinator's host from the
// node list, so `srun frugal train ...` needs no launcher.
inline constexpr std::string_view kSlurmProcId = "SLURM_PROCID";
inline constexpr std::string_view kSlurmNTasks = "SLURM_NTASKS";
inline constexpr std::string_view kSlurmNodeId = "SLURM_NODEID";  // this host's index in the node list
inline constexpr std::string_view kSlurmStepNodeList = "SLURM_STEP_NODELIST";
inline constexpr std::string_view kSlurmJobNodeList = "SLURM_JOB_NODELIST";
inline constexpr std::string_view kSlurmStepTasksPerNode = "SLURM_STEP_TASKS_PER_NODE";  // "2(x3),1"
inline constexpr std::string_view kSlurmTasksPerNode = "SLURM_TASKS_PER_NODE";          // the job's
inline constexpr std::string_view kSlurmNTasksPerNode = "SLURM_NTASKS_PER_NODE";        // --ntasks-per-node

}  // namespace frugal::comm::env
