// Loading a step library: dlopen, ABI check, description, parameters in and
// out (safetensors), and the collective settling of errors.
#include "common.h"
#include "hc/base/settings.h"
#include "machine_check.h"

#include "hc/base/files.h"
#include "hc/base/safetensors.h"
#include "hc/abi/random.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace hcrun {

std::string canonicalDtype(const std::string &n) {
  static const std::map<std::string, std::string> names = {
      {"float32", "F32"}, {"f32", "F32"}, {"F32", "F32"}, {"f4", "F32"},
      {"float", "F32"},   {"float64", "F64"}, {"f64", "F64"}, {"F64", "F64"},
      {"f8", "F64"},      {"double", "F64"}, {"int64", "I64"}, {"i64", "I64"},
      {"I64", "I64"},     {"i8", "I64"},  {"int32", "I32"}, {"i32", "I32"},
      {"I32", "I32"},     {"i4", "I32"},  {"uint8", "U8"},  {"u1", "U8"},
      {"U8", "U8"},       {"bool", "BOOL"}, {"b1", "BOOL"}, {"BOOL", "BOOL"}};
  auto it = names.find(n);
  return it == names.end() ? std::string() : it->second;
}

std::size_t dtypeSize(const std::string &c) {
  return hc::rt::safetensorsItemSize(c);
}

std::size_t TensorSpec::numElements() const {
  std::size_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<std::size_t>(d);
  return n;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

const TensorSpec *Description::input(const std::string &name) const {
  for (const auto &t : inputs)
    if (t.name == name)
      return &t;
  return nullptr;
}
const TensorSpec *Description::labelTable() const {
  const TensorSpec *table = nullptr;
  int found = 0;
  const std::string suffix = kLabelTableSuffix;
  for (const TensorSpec &s : parameters)
    if (s.shape.size() == 2 && s.name.size() >= suffix.size() &&
        s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      table = &s;
      ++found;
    }
  return found == 1 ? table : nullptr;
}

const TensorSpec *Description::parameter(const std::string &name) const {
  for (const auto &t : parameters)
    if (t.name == name)
      return &t;
  return nullptr;
}

namespace {
using json = nlohmann::json;

std::vector<TensorSpec> parseSpecs(const std::string &where, const json &d,
                                   const char *key, bool needDtype,
                                   const char *defaultDtype) {
  std::vector<TensorSpec> out;
  if (!d.contains(key))
    return out;
  const json &list = d[key];
  if (!list.is_array())
    usageError(where + ": description '" + key + "' is not a list");
  for (const json &e : list) {
    TensorSpec t;
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        !e.contains("shape") || !e["shape"].is_array())
      usageError(where + ": description '" + key +
                 "' entry without a name and a shape: " + e.dump());
    t.name = e["name"].get<std::string>();
    std::string dt = defaultDtype;
    if (e.contains("dtype") && e["dtype"].is_string())
      dt = e["dtype"].get<std::string>();
    else if (needDtype)
      usageError(where + ": description '" + key + "' entry '" + t.name +
                 "' has no dtype");
    t.dtype = canonicalDtype(dt);
    if (t.dtype.empty())
      usageError(where + ": '" + t.name + "' has unsupported dtype '" + dt + "'");
    for (const json &x : e["shape"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        usageError(where + ": '" + t.name + "' has a bad shape " +
                   e["shape"].dump());
      t.shape.push_back(x.get<int64_t>());
    }
    if (e.contains("trainable") && e["trainable"].is_boolean())
      t.trainable = e["trainable"].get<bool>();
    out.push_back(std::move(t));
  }
  return out;
}

Description parseDescription(const std::string &where, const char *text) {
  Description d;
  if (!text)
    usageError(where + ": the library has no description");
  try {
    d.raw = json::parse(text);
  } catch (const json::exception &e) {
    usageError(where + ": malformed description JSON: " + e.what());
  }
  const json &r = d.raw;
  if (!r.is_object())
    usageError(where + ": description is not a JSON object");
  if (!r.contains("batch_per_rank") || !r["batch_per_rank"].is_number_integer() ||
      r["batch_per_rank"].get<int64_t>() < 1)
    usageError(where + ": description has no positive integer batch_per_rank");
  d.batchPerRank = r["batch_per_rank"].get<int64_t>();
  if (!r.contains("inputs") || !r.contains("parameters"))
    usageError(where + ": description lacks 'inputs' or 'parameters'");
  d.inputs = parseSpecs(where, r, "inputs", true, "");
  d.parameters = parseSpecs(where, r, "parameters", false, "F32");
  d.state = parseSpecs(where, r, "state", false, "F32");
  if (d.inputs.empty())
    usageError(where + ": description lists no inputs");
  for (const auto &in : d.inputs)
    if (in.name == hc::rt::kRngSeedInput || in.name == hc::rt::kRngStepInput ||
        in.name == hc::rt::kSampleOffsetInput) {
      // The keys of the graph's own random draws: one per batch.
      if (in.dtype != "I64" || !in.shape.empty())
        usageError(where + ": input '" + in.name + "' is " + in.dtype + " " +
                   shapeString(in.shape) + ", a random draw's key is I64 []");
    } else if (in.shape.empty() || in.shape[0] != d.batchPerRank)
      usageError(where + ": input '" + in.name + "' has shape " +
                 shapeString(in.shape) + ", whose first dimension is not "
                 "batch_per_rank " + std::to_string(d.batchPerRank));
  if (r.contains("gradients")) {
    if (!r["gradients"].is_array())
      usageError(where + ": description 'gradients' is not a list");
    for (const json &g : r["gradients"]) {
      if (!g.is_string() || !d.parameter(g.get<std::string>()))
        usageError(where + ": gradient " + g.dump() + " is not a parameter");
      d.gradients.push_back(g.get<std::string>());
    }
  }
  if (r.contains("frozen") && r["frozen"].is_array())
    for (const json &f : r["frozen"])
      for (auto &p : d.parameters)
        if (f.is_string() && p.name == f.get<std::string>())
          p.trainable = false;
  if (r.contains("flops_per_step") && r["flops_per_step"].is_number())
    d.flopsPerStep = r["flops_per_step"].get<double>();
  if (r.contains("init_file") && r["init_file"].is_string())
    d.initFile = r["init_file"].get<std::string>();
  if (r.contains("init_hash") && r["init_hash"].is_string())
    d.initHash = r["init_hash"].get<std::string>();
  if (r.contains("dit_config") && r["dit_config"].is_object())
    d.ditConfig = r["dit_config"];
  else if (r.contains("dit_config") && r["dit_config"].is_string()) {
    // The ONNX metadata (hc.dit_config) copied verbatim as a JSON string.
    try {
      d.ditConfig = json::parse(r["dit_config"].get<std::string>());
    } catch (const json::exception &e) {
      usageError(where + ": malformed dit_config: " + e.what());
    }
  }
  if (r.contains("optimizer") && r["optimizer"].is_object() &&
      r["optimizer"].contains("name") && r["optimizer"]["name"].is_string())
    d.optimizer = r["optimizer"]["name"].get<std::string>();
  if (r.contains("hyperparameters")) {
    const json &h = r["hyperparameters"];
    if (!h.is_object())
      usageError(where + ": \"hyperparameters\" must be an object");
    for (auto &[name, value] : h.items()) {
      if (!value.is_number())
        usageError(where + ": hyperparameter '" + name + "' is not a number");
      d.hyperparameters[name] = value.get<double>();
    }
  }
  // The graph's own random draws (e.g. upstream DiT's label dropout) and
  // the inputs they choose: hc-run must not drop those a second time.
  if (r.contains("random_ops")) {
    const json &ro = r["random_ops"];
    auto bad = [&] {
      usageError(where + ": \"random_ops\" must be a list of {op_id, selects: [input names]}");
    };
    if (!ro.is_array())
      bad();
    for (const json &draw : ro) {
      if (!draw.is_object() || !draw.contains("selects") || !draw["selects"].is_array())
        bad();
      for (const json &name : draw["selects"]) {
        if (!name.is_string())
          bad();
        d.graphSelects.insert(name.get<std::string>());
      }
    }
  } else {
    for (const TensorSpec &in : d.inputs)
      if (in.name == hc::rt::kRngSeedInput)
        usageError(where + ": the graph draws random numbers, but its description does not "
                   "say what they choose (\"random_ops\"); recompile it with this hc-compile");
  }
  return d;
}
} // namespace

namespace {
// dlopen maps an ELF file's segments as its headers describe them; a file
// cut short (an interrupted copy, `head -c`) then faults with SIGBUS on the
// first page past its end. So the headers are checked against the file's
// size first: every loadable segment, the program and section header tables
// must lie inside it.
void checkSharedObject(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    usageError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  Elf64_Ehdr eh;
  bool headerRead = fstat(fd, &st) == 0 && pread(fd, &eh, sizeof eh, 0) == sizeof eh;
  const uint64_t size = headerRead ? static_cast<uint64_t>(st.st_size) : 0;
  auto fail = [&](const std::string &why) {
    ::close(fd);
    usageError(path + ": not a usable step library: " + why);
  };
  if (!headerRead || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    fail("not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    fail("not a 64-bit shared library");
  auto past = [&](uint64_t offset, uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  const std::string cut = "truncated (" + std::to_string(size) + " bytes)";
  if (past(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)))
    fail(cut + ": its program headers lie past the end");
  if (eh.e_shnum && past(eh.e_shoff, uint64_t{eh.e_shnum} * eh.e_shentsize))
    fail(cut + ": its section headers lie past the end");
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) !=
        static_cast<ssize_t>(sizeof ph))
      fail("cannot read its program headers");
    if (ph.p_type == PT_LOAD && past(ph.p_offset, ph.p_filesz))
      fail(cut + ": a loadable segment needs " +
           std::to_string(ph.p_offset + ph.p_filesz) + " bytes");
  }
  ::close(fd);
}
} // namespace

void StepLibrary::load(const std::string &p) {
  path = p;
  char resolved[PATH_MAX];
  if (!realpath(p.c_str(), resolved))
    usageError(p + ": cannot open: " + std::strerror(errno));
  std::string full = resolved;
  checkSharedObject(p);
  folder = full.substr(0, full.find_last_of('/'));
  if (folder.empty())
    folder = "/";
  void *h = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    usageError(p + ": cannot load step library: " + (e ? e : "dlopen failed"));
  }
  auto get = reinterpret_cast<hc_step_get_api_fn>(dlsym(h, "hc_step_get_api"));
  if (!get)
    usageError(p + ": not a step library (no hc_step_get_api symbol)");
  api = get();
  if (!api)
    usageError(p + ": hc_step_get_api returned nothing");
  if (api->abi_version != HC_STEP_ABI_VERSION)
    usageError(p + ": step ABI version " + std::to_string(api->abi_version) +
               ", this hc-run speaks version " +
               std::to_string(HC_STEP_ABI_VERSION) +
               "; recompile it with a matching hc-compile");
  if (!api->create || !api->destroy || !api->set_tensor || !api->get_tensor ||
      !api->step)
    usageError(p + ": step library API has a null entry");
  desc = parseDescription(p, api->description_json);
  if (desc.raw.contains("abi_version") && desc.raw["abi_version"].is_number() &&
      desc.raw["abi_version"].get<int64_t>() != HC_STEP_ABI_VERSION)
    usageError(p + ": description says ABI version " +
               desc.raw["abi_version"].dump() + ", this hc-run speaks " +
               std::to_string(HC_STEP_ABI_VERSION));
}

StepContext::StepContext(const StepLibrary &lib, hc::rt::Comm &comm,
                         bool checkFinite, bool profile)
    : lib_(lib) {
  env_.rank = comm.rank();
  env_.check_finite = checkFinite ? 1 : 0;
  env_.profile = profile ? 1 : 0;
  env_.world_size = comm.size();
  env_.allreduce_sum_f32 = hc::rt::hc_comm_allreduce_sum_f32;
  // Buckets overlap backward through the comm thread unless
  // HC_SYNC_ALLREDUCE=1 asks for the blocking form (to measure the overlap).
  const char *sync = hc::rt::setting(hc::rt::Setting::SyncAllreduce);
  if (!(sync && std::string(sync) == "1")) {
    env_.allreduce_start_f32 = hc::rt::hc_comm_allreduce_start_f32;
    env_.allreduce_wait = hc::rt::hc_comm_allreduce_wait;
    env_.allreduce_progress = hc::rt::hc_comm_allreduce_progress;
  }
  env_.comm = &comm;
  preemption::attach(env_, comm);  // a no-op unless train mode armed it
  char err[512] = {0};
  step_ = lib.api->create(&env_, err, sizeof err);
  if (!step_) {
    std::string why = err[0] ? err : "no reason given";
    if (why.find("allocate") != std::string::npos)
      why += " (the plan's arenas take " +
             std::to_string(plannedArenaBytes(lib.desc.raw)) + " bytes per rank; " +
             memoryOffer().text() + ")";
    throw Error(1, lib.path + ": cannot create a step context: " + why);
  }
}

StepContext::~StepContext() {
  if (step_)
    lib_.api->destroy(step_);
}

std::string StepLibrary::initPath(const std::string &given) const {
  if (!given.empty())
    return given;
  if (desc.initFile.empty())
    usageError(path + ": its description names no init_file; give "
               "--init P.safetensors");
  return desc.initFile[0] == '/' ? desc.initFile : folder + "/" + desc.initFile;
}

void StepContext::loadInit(const std::string &given) {
  const std::string init = lib_.initPath(given);
  // The library's own init file must be the one it was compiled with: a
  // recompile that failed halfway, or files copied from two builds, would
  // otherwise train one model's code on another's weights without a word.
  const Description &d = lib_.desc;
  if (given.empty() && !d.initHash.empty()) {
    uint64_t h = 0;
    std::string err;
    if (!hc::rt::hashFile(init, h, err))
      usageError(err);
    if (hc::rt::hashHex(h) != d.initHash)
      usageError(init + " does not belong to " + lib_.path + " (content hash " +
                 hc::rt::hashHex(h) + ", the library was compiled with " +
                 d.initHash + "): recompile the model, or give --init P to "
                 "start from other parameters on purpose");
  }
  loadTensors(init);
}

void StepContext::loadTensors(const std::string &path) {
  hc::rt::SafetensorsFile f;
  std::string err;
  if (!f.open(path, err))
    usageError(err);
  const Description &d = lib_.desc;
  auto check = [&](const TensorSpec &spec, const hc::rt::SafetensorsEntry &e,
                   const std::string &setName) {
    if (canonicalDtype(e.dtype) != spec.dtype)
      usageError(path + ": tensor '" + e.name + "' is " + e.dtype + ", " +
                 lib_.path + " expects " + spec.dtype);
    if (e.shape != spec.shape)
      usageError(path + ": tensor '" + e.name + "' has shape " +
                 shapeString(e.shape) + ", " + lib_.path + " expects " +
                 shapeString(spec.shape));
    try {
      requireFinite("tensor", e.name, spec.dtype, f.data(e), e.numElements(), 0);
    } catch (const Error &) {
      usageError(path + ": tensor '" + e.name + "' holds NaN or infinity; "
                 "training cannot start from it");
    }
    if (lib_.api->set_tensor(step_, setName.c_str(), f.data(e), e.bytes) != 0)
      usageError(path + ": " + lib_.path + " refused tensor '" + e.name + "'");
    f.release(e);  // never the whole file resident beside the step's copy
  };
  for (const auto &p : d.parameters) {
    const auto *e = f.find(p.name);
    if (!e)
      usageError(path + ": parameter '" + p.name + "' is missing (" +
                 std::to_string(d.parameters.size()) + " expected)");
    check(p, *e, p.name);
  }
  int64_t emaSkipped = 0;
  for (const auto &e : f.entries()) {
    if (d.parameter(e.name))
      continue;
    // An hc checkpoint as --init (fine-tuning from it): its EMA copy is not
    // what trains; --resume is what restores it.
    if (e.name.rfind("ema:", 0) == 0) {
      ++emaSkipped;
      continue;
    }
    const TensorSpec *s = nullptr;
    for (const auto &st : d.state)
      if (st.name == e.name)
        s = &st;
    if (!s)
      usageError(path + ": tensor '" + e.name + "' is neither a parameter nor "
                 "optimizer state of " + lib_.path);
    check(*s, e, s->name);
  }
  if (emaSkipped && env_.rank == 0)
    std::fprintf(stderr, "hc-run: note: %s: %lld EMA tensors (ema:*) not loaded; "
                 "--init starts training from the parameters\n",
                 path.c_str(), static_cast<long long>(emaSkipped));
}

namespace {
// What a save of `what` holds: the specs and the names to read them by.
void savedTensors(const Description &d, StepContext::What what,
                  std::vector<TensorSpec> &specs,
                  std::vector<std::string> &getNames) {
  if (what == StepContext::What::Params) {
    specs = d.parameters;
    for (const auto &p : specs)
      getNames.push_back(p.name);
  } else if (what == StepContext::What::Grads) {
    for (const auto &g : d.gradients) {
      specs.push_back(*d.parameter(g));
      getNames.push_back("grad:" + g);
    }
  } else {
    specs = d.state;
    for (const auto &s : specs)
      getNames.push_back(s.name);
  }
}
const char *kindOf(StepContext::What what) {
  return what == StepContext::What::Params  ? "parameter"
         : what == StepContext::What::Grads ? "gradient"
                                            : "optimizer state";
}
} // namespace

void requireFinite(const char *kind, const std::string &name,
                   const std::string &dtype, const void *data,
                   std::size_t elements, int64_t step) {
  if (dtype != "F32")
    return;
  const float *x = static_cast<const float *>(data);
  for (std::size_t i = 0; i < elements; ++i)
    if (!std::isfinite(x[i])) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", static_cast<double>(x[i]));
      throw Error(1, std::string("non-finite training state after step ") +
                         std::to_string(step) + ": " + kind + " '" + name +
                         "' holds " + value + " (element " + std::to_string(i) +
                         "); stopping, nothing written (earlier checkpoints, "
                         "all finite, are kept)");
    }
}

void StepContext::checkFinite(What what, int64_t step) const {
  std::vector<TensorSpec> specs;
  std::vector<std::string> getNames;
  savedTensors(lib_.desc, what, specs, getNames);
  std::vector<char> buf;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    buf.resize(specs[i].bytes());
    if (lib_.api->get_tensor(step_, getNames[i].c_str(), buf.data(),
                             buf.size()) != 0)
      throw Error(1, lib_.path + ": cannot read tensor '" + getNames[i] +
                         "' from the step");
    requireFinite(kindOf(what), specs[i].name, specs[i].dtype, buf.data(),
                  specs[i].numElements(), step);
  }
}

void StepContext::save(What what, const std::string &path,
                       const std::map<std::string, std::string> &metadata) const {
  std::vector<TensorSpec> specs;
  std::vector<std::string> getNames;
  savedTensors(lib_.desc, what, specs, getNames);
  std::vector<std::vector<char>> buffers(specs.size());
  std::vector<hc::rt::SafetensorsTensorRef> refs;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    buffers[i].resize(specs[i].bytes());
    if (lib_.api->get_tensor(step_, getNames[i].c_str(), buffers[i].data(),
                             buffers[i].size()) != 0)
      throw Error(1, lib_.path + ": cannot read tensor '" + getNames[i] +
                         "' from the step (" + std::to_string(buffers[i].size()) +
                         " bytes)");
    refs.push_back({specs[i].name, specs[i].dtype, specs[i].shape,
                    buffers[i].data()});
  }
  std::string err;
  if (!hc::rt::writeSafetensors(path, refs, metadata, err))
    throw Error(1, err);
}

uint64_t StepContext::parameterHash() const {
  uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> buf;
  for (const auto &p : lib_.desc.parameters) {
    buf.resize(p.bytes());
    if (lib_.api->get_tensor(step_, p.name.c_str(), buf.data(), buf.size()) != 0)
      throw Error(1, lib_.path + ": cannot read parameter '" + p.name + "'");
    for (unsigned char c : buf)
      h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

double StepContext::evaluate(const void *const *inputs) {
  if (!lib_.api->evaluate)
    throw Error(1, lib_.path + " cannot evaluate a loss without training (no "
                               "evaluate entry: a library of step ABI 5 has one)");
  double loss = 0;
  if (int rc = lib_.api->evaluate(step_, inputs, &loss)) {
    const char *why = lib_.api->last_error ? lib_.api->last_error(step_) : "";
    throw Error(1, "validation failed in " + lib_.path + " (" +
                       (why && *why ? why : "code " + std::to_string(rc)) + ")");
  }
  return loss;
}

void StepContext::getTensor(const std::string &name, void *data, std::size_t bytes) const {
  if (lib_.api->get_tensor(step_, name.c_str(), data, bytes) != 0)
    throw Error(1, lib_.path + ": cannot read tensor '" + name + "'");
}

void StepContext::setTensor(const std::string &name, const void *data, std::size_t bytes) {
  if (lib_.api->set_tensor(step_, name.c_str(), data, bytes) != 0)
    throw Error(1, lib_.path + ": cannot set tensor '" + name + "'");
}

double StepContext::gradNorm() const {
  float v = 0;
  if (lib_.api->get_tensor(step_, "grad_norm", &v, sizeof v) != 0)
    return std::nan("");
  return v;
}

void StepContext::setHyperparameter(const std::string &name, double value) {
  if (lib_.api->set_hyperparameter(step_, name.c_str(), value) != 0) {
    const char *why = lib_.api->last_error ? lib_.api->last_error(step_) : "";
    throw Error(1, lib_.path + ": the step refused hyperparameter " + name + " = " +
                       nlohmann::json(value).dump() + (why && *why ? std::string(": ") + why
                                                                   : std::string()));
  }
}

double StepContext::step(const void *const *inputs, int64_t stepIndex,
                         bool *stopped) {
  double loss = 0;
  int rc = lib_.api->step(step_, inputs, &loss);
  if (rc == -4 && stopped) {
    *stopped = true;
    return 0;
  }
  const char *why = lib_.api->last_error ? lib_.api->last_error(step_) : "";
  if (rc == -2)
    throw Error(1, "--check-finite: step " + std::to_string(stepIndex) +
                       ", rank " + std::to_string(env_.rank) + ": " +
                       (why && *why ? why : "a non-finite value (no detail)"));
  if (rc != 0)
    throw Error(1, "step " + std::to_string(stepIndex) + " failed in " +
                       lib_.path + " (" + (why && *why ? why : "its collective or "
                       "computation reported an error") + ")");
  return loss;
}

bool pathIsPerRank(const std::string &path) {
  return path.find("{rank}") != std::string::npos;
}

std::string pathForRank(const std::string &path, int rank) {
  std::string out = path;
  for (std::size_t p; (p = out.find("{rank}")) != std::string::npos;)
    out.replace(p, 6, std::to_string(rank));
  return out;
}

void agreeOrExit(hc::rt::Comm &comm, const Error *local) {
  int bad = comm.firstFailingRank(local != nullptr);
  if (bad < 0)
    return;
  double code = local ? local->code : 0;
  if (comm.size() > 1 && !comm.broadcast(&code, sizeof code, bad))
    comm.fail(1, "collective failed while reporting an error");
  if (comm.rank() == bad) {
    std::fflush(stdout);
    // With several ranks, say which: a file or node only it lacks.
    std::string who =
        comm.size() > 1 ? "rank " + std::to_string(bad) + ": " : std::string();
    std::fprintf(stderr, "hc-run: %s%s\n", who.c_str(), local->what());
    std::fflush(stderr);
  }
  comm.finalize();
  std::exit(static_cast<int>(code));
}

void finishRun(const Options &opt, StepContext &ctx, hc::rt::Comm &comm,
               int64_t stepsDone) {
  std::map<std::string, std::string> md = {
      {"format", "pt"},
      {"producer", "hc-run"},
      {"step", std::to_string(stepsDone)},
      {"ranks", std::to_string(comm.size())}};
  struct Out {
    const std::string &path;
    StepContext::What what;
  } outs[] = {{opt.saveParams, StepContext::What::Params},
              {opt.saveGrads, StepContext::What::Grads},
              {opt.saveState, StepContext::What::State}};
  Error failure(0, "");
  bool failed = false;
  try {
    // Every output checked before the first is written.
    for (const Out &o : outs)
      if (!o.path.empty())
        ctx.checkFinite(o.what, stepsDone);
    for (const Out &o : outs) {
      if (o.path.empty())
        continue;
      if (pathIsPerRank(o.path))
        ctx.save(o.what, pathForRank(o.path, comm.rank()), md);
      else if (comm.rank() == 0)
        ctx.save(o.what, o.path, md);
    }
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(comm, failed ? &failure : nullptr);

  // Data parallelism must keep every rank's parameters bit-identical.
  if (comm.size() > 1) {
    uint64_t h = ctx.parameterHash();
    uint64_t h0 = h;
    if (!comm.broadcast(&h0, sizeof h0, 0))
      comm.fail(1, "collective failed while comparing parameters");
    Error differ(1, "parameters differ between rank 0 and rank " +
                        std::to_string(comm.rank()) + " after " +
                        std::to_string(stepsDone) +
                        " steps: the step library is not deterministic "
                        "across ranks");
    agreeOrExit(comm, h != h0 ? &differ : nullptr);
  }
}

} // namespace hcrun
