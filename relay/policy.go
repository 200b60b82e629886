package relay

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/troupebench/troupe/channel"
)

// The machine prefixes of refusals (NIP-01), which clients branch on.
const (
	PrefixAuthRequired = "auth-required:"
	PrefixRestricted   = "restricted:"
	PrefixInvalid      = "invalid:"
	PrefixRateLimited  = "rate-limited:"
	PrefixDuplicate    = "duplicate:"
	PrefixError        = "error:"
)

// The kinds this relay carries (package channel owns them).
const (
	KindProfile         = channel.KindProfile
	KindChannelMessage  = channel.KindMessage
	KindChannelMetadata = channel.KindMetadata
	KindChannelMembers  = channel.KindMembers
)

// Limits beyond the content's: the tags are the rest of an event a channel
// stores, and filters are what a REQ makes the relay check, under the
// channel's lock, against every stored event and every new one.
const (
	maxTags            = 256      // an h tag and p tags for a large team
	maxTagBytes        = 16 << 10 // all tag values together
	maxFilters         = 10       // per REQ
	maxFilterValues    = 1000     // ids, authors, kinds and tag values of one filter
	maxConnections     = 4096     // websocket connections at once, relay-wide
	maxUnauthenticated = 1024     // of which not yet authenticated
	unauthenticatedTTL = time.Minute
)

// DonePrefix starts the message with which the orchestrator ends a trial.
const DonePrefix = channel.DonePrefix

// refusal is a reason to refuse a client message; its text starts with a
// machine prefix.
type refusal string

func refuse(prefix, format string, args ...any) refusal {
	return refusal(prefix + " " + fmt.Sprintf(format, args...))
}

// checkEvent applies the rules that need no relay state to an event whose id
// and signature were already verified: its kind, its channel tag, its size
// and its clock. It returns the channel the event belongs to ("" for a
// profile).
func checkEvent(ev *nostr.Event, now time.Time, skew time.Duration, maxContent int) (channel string, r refusal) {
	if len(ev.Content) > maxContent {
		return "", refuse(PrefixInvalid, "content is %d bytes; the limit is %d", len(ev.Content), maxContent)
	}
	if len(ev.Tags) > maxTags {
		return "", refuse(PrefixInvalid, "%d tags; the limit is %d", len(ev.Tags), maxTags)
	}
	tagBytes := 0
	for _, t := range ev.Tags {
		for _, v := range t {
			tagBytes += len(v)
		}
	}
	if tagBytes > maxTagBytes {
		return "", refuse(PrefixInvalid, "the tags hold %d bytes; the limit is %d", tagBytes, maxTagBytes)
	}
	if d := now.Sub(ev.CreatedAt.Time()); d > skew || d < -skew {
		return "", refuse(PrefixInvalid, "created_at is %s from the relay's clock; the window is ±%s", d.Round(time.Second), skew)
	}
	switch ev.Kind {
	case KindProfile:
		return "", ""
	case KindChannelMessage:
		var hs []string
		for _, t := range ev.Tags {
			if len(t) >= 1 && t[0] == "h" {
				if len(t) < 2 || t[1] == "" {
					return "", refuse(PrefixInvalid, "an h tag must name a channel")
				}
				hs = append(hs, t[1])
			}
		}
		if len(hs) != 1 {
			return "", refuse(PrefixInvalid, "a channel message needs exactly one h tag naming its channel; it has %d", len(hs))
		}
		return hs[0], ""
	}
	return "", refuse(PrefixRestricted, "kind %d is not carried here; this relay takes kind 9 channel messages (with an h tag) and kind 0 profiles", ev.Kind)
}

// filterShape is what a REQ filter asks for.
type filterShape int

const (
	shapeChannel  filterShape = iota // kind 9 messages of channels named by #h
	shapeMetadata                    // the relay's kind 39000/39002 events, by #d
	shapeProfiles                    // members' kind 0 profiles
)

// classifyFilter says which of the three things a filter may ask for it asks
// for, and which channels it names. Anything else is refused: the relay
// serves its trial channels and nothing more.
func classifyFilter(f nostr.Filter) (filterShape, []string, refusal) {
	if hs, ok := f.Tags["h"]; ok {
		if len(hs) == 0 {
			return 0, nil, refuse(PrefixInvalid, "#h must name at least one channel")
		}
		if len(f.Kinds) > 0 && !slices.Equal(f.Kinds, []int{KindChannelMessage}) {
			return 0, nil, refuse(PrefixRestricted, "a channel subscription may only ask for kind 9")
		}
		if _, ok := f.Tags["d"]; ok {
			return 0, nil, refuse(PrefixRestricted, "a filter cannot ask for #h and #d together")
		}
		return shapeChannel, hs, ""
	}
	if len(f.Kinds) > 0 && !slices.ContainsFunc(f.Kinds, func(k int) bool { return k != KindChannelMetadata && k != KindChannelMembers }) {
		ds := f.Tags["d"]
		if len(ds) == 0 {
			return 0, nil, refuse(PrefixRestricted, "channel metadata (kinds 39000, 39002) is asked for by #d with the channel ids")
		}
		return shapeMetadata, ds, ""
	}
	if slices.Equal(f.Kinds, []int{KindProfile}) && len(f.Tags) == 0 {
		return shapeProfiles, nil, ""
	}
	return 0, nil, refuse(PrefixRestricted, `this relay serves trial channels only: subscribe with {"kinds":[9],"#h":["<channel>"]}, {"kinds":[39000,39002],"#d":["<channel>"]} or {"kinds":[0]}`)
}

// matchesChannel reports whether a filter would match the kind 9 messages of
// a channel: what readiness needs from an agent's subscription.
func matchesChannel(f nostr.Filter, channel string) bool {
	return (len(f.Kinds) == 0 || slices.Contains(f.Kinds, KindChannelMessage)) && slices.Contains(f.Tags["h"], channel)
}

// isDone reports whether a kind 9 message declares completion.
func isDone(ev *nostr.Event) bool {
	return ev.Kind == KindChannelMessage && strings.HasPrefix(ev.Content, DonePrefix)
}

// normalizeURL makes relay URLs comparable the way NIP-42 compares them.
func normalizeURL(u string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(u)), "/")
}

// isHexKey reports whether s is a 32-byte key in lower-case hex.
func isHexKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// tokenBucket is a per-connection rate limit: rate tokens a second, up to
// burst. A zero rate never limits.
type tokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func (b *tokenBucket) allow(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
