package llm

import (
	"math"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// Cost prices usage in USD: uncached input, cached input and output at
// their rates per million. When the upstream reported no cached count, the
// cached share is the price's cache_read_rate of the input, rounded half to
// even as the original system rounded it.
func Cost(u modelcall.Usage, p manifest.Price) (usd float64, cached int64, source string) {
	cached, source = u.Cached, modelcall.CachedReported
	if !u.CachedReported {
		cached, source = int64(math.RoundToEven(float64(u.Input)*p.CacheReadRate)), modelcall.CachedEstimated
	}
	cached = min(max(cached, 0), u.Input)
	usd = (float64(u.Input-cached)*p.InputPerMillionUSD + float64(cached)*p.CachedInputPerMillionUSD + float64(u.Output)*p.OutputPerMillionUSD) / 1e6
	return usd, cached, source
}

// classifyStatus names the error class of an upstream status; "" for success.
func classifyStatus(status int) string {
	switch {
	case status < 400:
		return ""
	case status == 429:
		return modelcall.ClassRateLimit
	case status == 503 || status == 529:
		return modelcall.ClassOverloaded
	case status == 401 || status == 403:
		return modelcall.ClassAuth
	case status >= 500:
		return modelcall.ClassUpstream5xx
	}
	return modelcall.ClassBadRequest
}
