package energy

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// SamplesSchemaVersion is samples.csv's schema_version (srt-slurm
// core/power/contract.py SCHEMA_VERSION).
const SamplesSchemaVersion = 1

// SamplesHeader is samples.csv's header row (srt-slurm core/power/
// samples.py; InferenceX multinode.py SAMPLES_HEADER).
var SamplesHeader = []string{"schema_version", "timestamp_unix", "scrape_seq", "hostname", "gpu_index", "gpu_uuid", "power_w"}

// Reason codes of samples.csv's reader (samples.py read_samples).
const (
	ReasonHeader    = "samples_csv_header_mismatch"
	ReasonMalformed = "samples_csv_malformed"
	ReasonDuplicate = "duplicate_sample_row"
)

// ReadSamples reads samples.csv strictly, as srt-slurm's samples.py
// read_samples and InferenceX's multinode.py read_samples do: a row with a
// bad field is dropped as malformed, a repeated (seq, host, gpu) counted
// once; the reasons say what was dropped.
func ReadSamples(path string) ([]Sample, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(f))
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil || strings.Join(head, ",") != strings.Join(SamplesHeader, ",") {
		return nil, []string{ReasonHeader}, nil
	}
	var rows []Sample
	var reasons []string
	note := func(x string) {
		if !slices.Contains(reasons, x) {
			reasons = append(reasons, x)
		}
	}
	seen := map[string]bool{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil || len(rec) != len(SamplesHeader) {
			note(ReasonMalformed)
			continue
		}
		ver, e1 := strconv.Atoi(rec[0])
		ts, e2 := strconv.ParseFloat(rec[1], 64)
		seq, e3 := strconv.Atoi(rec[2])
		gpu, e4 := strconv.Atoi(rec[4])
		pw, e5 := strconv.ParseFloat(rec[6], 64)
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil || ver != SamplesSchemaVersion || rec[3] == "" || rec[5] == "" ||
			!finite(ts) || !finite(pw) || pw < 0 || seq < 0 || gpu < 0 {
			note(ReasonMalformed)
			continue
		}
		key := fmt.Sprintf("%d/%s/%d", seq, rec[3], gpu)
		if seen[key] {
			note(ReasonDuplicate)
			continue
		}
		seen[key] = true
		rows = append(rows, Sample{Timestamp: ts, Seq: seq, Hostname: rec[3], GPUIndex: gpu, GPUUUID: rec[5], PowerW: pw})
	}
	return rows, reasons, nil
}

// WriteSamples writes samples in samples.csv's format (Python's csv
// writer: \r\n line ends, floats as repr writes them).
func WriteSamples(w io.Writer, rows []Sample) error {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if err := cw.Write(SamplesHeader); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(SampleRecord(r)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SampleRecord is r as a samples.csv row.
func SampleRecord(r Sample) []string {
	return []string{strconv.Itoa(SamplesSchemaVersion), pyjson.FloatRepr(r.Timestamp), strconv.Itoa(r.Seq), r.Hostname,
		strconv.Itoa(r.GPUIndex), r.GPUUUID, pyjson.FloatRepr(r.PowerW)}
}
