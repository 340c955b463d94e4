package kernels

import "math"

// Fast exp, tanh, sigmoid, erf and Gelu for float32 tensors. They
// evaluate in float64 with a relative error near 1e-16 (erf and Gelu near
// 1e-12), so the float32 results are the correctly rounded ones except in
// rare near-halfway cases (within 1 ulp; the tests check 1 ulp over the
// whole float32 range), at a fraction of the cost of math.Exp, math.Tanh
// and math.Erf, which also handle the float64 range.

// expTab[j] = 2^(j/expTabN).
const expTabN = 64

var expTab = func() (t [expTabN]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / expTabN)
	}
	return
}()

const (
	expInvL  = expTabN / math.Ln2                   // 64/ln2
	expLHi   = 6.93147180369123816490e-01 / expTabN // ln2/64 with 32 significant bits
	expLLo   = 1.90821492927058770002e-10 / expTabN // the rest of ln2/64
	expMagic = 0x1.8p52                             // rounds to an integer when added
)

// expf computes e^x for x in float64 with about 1e-16 relative error,
// for arguments whose result is meant for float32 (|x| <= 700; beyond it
// the result saturates to 0 or +Inf).
func expf(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 700:
		return math.Inf(1)
	case x < -700:
		return 0
	}
	// x = (64q + j) ln2/64 + r, |r| <= ln2/128.
	t := x*expInvL + expMagic
	kf := t - expMagic
	k := int64(kf)
	r := (x - kf*expLHi) - kf*expLLo
	// e^r - 1 to degree 5: the remainder r^6/720 < 4e-17.
	p := r + r*r*(0.5+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720)))))
	j := k & (expTabN - 1)
	q := k >> 6 // floor division by 64 (arithmetic shift)
	scale := math.Float64frombits(uint64(q+1023) << 52)
	return expTab[j] * scale * (1 + p)
}

// tanhf is tanh in float64 with about 1e-14 relative error (for float32
// results).
func tanhf(x float64) float64 {
	a := math.Abs(x)
	if a < 0x1p-7 {
		// tanh x = x - x³/3 + 2x⁵/15 - ...: the x⁵ term is below 2^-30 x.
		return x - x*x*x*(1.0/3)
	}
	if a > 20 {
		return math.Copysign(1, x)
	}
	e := expf(2 * a)
	return math.Copysign(1-2/(e+1), x)
}

// sigmoidf is 1/(1+e^-x) for float32 results.
// e = e^-|x|; x >= 0: 1/(1+e), x < 0: e/(1+e), selected without a
// branch (the sign of an activation is random).
func sigmoidf(x float64) float64 { return sigmoidFrom(x, expf(-math.Abs(x))) }

// sigmoidFrom is sigmoidf(x) given e = expf(-|x|).
func sigmoidFrom(x, e float64) float64 {
	r := 1 / (1 + e)
	return selectNeg(x, e*r, r)
}

const sqrt2OverPi = 0.79788456080286535587989211986876 // √(2/π)

func geluTanhf(x float64) float64 {
	return 0.5 * x * (1 + tanhf(sqrt2OverPi*(x+0.044715*x*x*x)))
}

// widen converts a float32 to float64 through the integer unit. The
// direct conversion (CVTSS2SD) merges into its destination register, which
// in a loop over f(float64(x[i])) is the previous element's result: every
// element then waits for the previous one (measured: exp 15 ns an element
// instead of 5).
func widen(v float32) float64 {
	b := math.Float32bits(v)
	e := b >> 23 & 0xff
	if e == 0 || e == 0xff {
		return float64(v) // zero, subnormal, Inf, NaN
	}
	return math.Float64frombits(uint64(b>>31)<<63 | uint64(e+(1023-127))<<52 | uint64(b&0x7fffff)<<29)
}

// Slice forms: dst[i] = f(src[i]). The exponentials of a chunk are
// computed together (expN: AVX-512 where available, same bits as expf)
// between two plain loops that prepare their arguments and finish.

// vecChunk is the number of elements done per chunk (a stack buffer).
const vecChunk = 256

// expN sets d[i] = expf(s[i]); d may be s.
func expN(d, s []float64) {
	d = d[:len(s)]
	for i := expVec(d, s); i < len(s); i++ {
		d[i] = expf(s[i])
	}
}

func expSlice(d, s []float32) {
	d = d[:len(s)]
	var buf [vecChunk]float64
	for lo := 0; lo < len(s); lo += vecChunk {
		ss := s[lo:min(lo+vecChunk, len(s))]
		dd, b := d[lo:lo+len(ss)], buf[:len(ss)]
		for i, v := range ss {
			b[i] = float64(v)
		}
		expN(b, b)
		for i, e := range b {
			dd[i] = float32(e)
		}
	}
}

func tanhSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(tanhf(widen(v)))
	}
}

func sigmoidSlice(d, s []float32) {
	d = d[:len(s)]
	var buf [vecChunk]float64
	for lo := 0; lo < len(s); lo += vecChunk {
		ss := s[lo:min(lo+vecChunk, len(s))]
		dd, b := d[lo:lo+len(ss)], buf[:len(ss)]
		for i, v := range ss {
			b[i] = -math.Abs(float64(v))
		}
		expN(b, b)
		for i, v := range ss {
			dd[i] = float32(sigmoidFrom(widen(v), b[i]))
		}
	}
}

func geluTanhSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(geluTanhf(widen(v)))
	}
}

// erfcTab holds, for y in [i/2, i/2+1/2), the coefficients (lowest
// first) of a degree-10 polynomial in t = y - (i/2 + 1/4) fitting
// h(y) = erfc(y)·e^(y²), a smooth and slowly varying function (h(0) = 1,
// h(y) ~ 1/(y√π)). Chebyshev fits made with mpmath; the relative error of
// the fit is below 5e-13 on [0, 1/2) and below 1e-13 elsewhere.
var erfcTab = [erfcTabN][11]float64{
	{0.77034654773099674392, -0.74320589324133240845, 0.58454507442778709234, -0.39804641279583890329, 0.24251673378624294666, -0.13496721706353545982, 0.069591793569268418538, -0.033579312810908417880, 0.015293985103554816177, -0.0068030278419672221785, 0.0028004139930585601016},
	{0.50693765029314480579, -0.36797269165708415827, 0.23095813155174045365, -0.12983606158261418467, 0.066790542386121084056, -0.031897298944975356073, 0.014289211328746454358, -0.0060501851058346706503, 0.0024371750653941634535, -0.00095998084901824248250, 0.00035411958410052067017},
	{0.36782291645236109293, -0.20882187596479042179, 0.10679557149665491900, -0.050218274338138851108, 0.022011364232901169853, -0.0090816328051077157395, 0.0035531115109394919584, -0.0013255940631394849077, 0.00047391159845932141207, -0.00016597191018094611246, 0.000054990519939236531517},
	{0.28497223473743638921, -0.13097634551451561122, 0.055763630087095850988, -0.022259995231662830556, 0.0084043192045831812652, -0.0030209755222856620454, 0.0010392047683105274860, -0.00034350154488824802322, 0.00010949630756759600899, -0.000034262903417786743753, 0.000010230004516717152071},
	{0.23108725873039186996, -0.088486502808755174055, 0.031992627410707809292, -0.011002060754515645940, 0.0036189953538630446541, -0.0011437286559903851023, 0.00034853546637870763112, -0.00010271478515768969568, 0.000029351627663895812189, -8.2507902415172895863e-6, 2.2288807709169355827e-6},
	{0.19366209627906867860, -0.063237637560636213017, 0.019758592987323186864, -0.0059343378965591916634, 0.0017195818851859957908, -0.00048219512427904577312, 0.00013118180977493914478, -0.000034697173655622514240, 8.9398182487326628873e-6, -2.2703043916655032031e-6, 5.5737069566873782270e-7},
	{0.16633534842682187676, -0.047199402321170729000, 0.012937290883018234684, -0.0034354713007942890718, 0.00088600457750980890313, -0.00022238257971505019237, 0.000054420411003327261974, -0.000013004269465762603754, 3.0387519137421119220e-6, -7.0113130786298157101e-7, 1.5716033911182831809e-7},
	{0.14558972127503853905, -0.036456257532723632984, 0.0088787555273253178789, -0.0021072828701364964194, 0.00048822238208907720862, -0.00011057957784555837442, 0.000024516325957838977152, -5.3265660218323192901e-6, 1.1353043564250468326e-6, -2.3930633200491105416e-7, 4.9204337210867396447e-8},
	{0.12934527478598791080, -0.028944331414615364400, 0.0063318662738727552719, -0.0013559331670937667894, 0.00028457515683826361637, -0.000058595501138813390533, 0.000011848093814851700980, -2.3545668086074742804e-6, 4.6025400786976233140e-7, -8.9094957748973713117e-8, 1.6880372483249103685e-8},
	{0.11630270721024730767, -0.023503448598163162203, 0.0046613263689723419591, -0.00090809889702613020308, 0.00017392830404004627641, -0.000032775781453563649413, 6.0811146049141956516e-6, -1.1115560617413052090e-6, 2.0028997668497276877e-7, -3.5782091428852371498e-8, 6.2742954247450803689e-9},
	{0.10561273546889180240, -0.019445444672148652796, 0.0035241509401113975661, -0.00062910149104122166773, 0.00011068405606881178192, -0.000019204078790461595750, 3.2875476990837078453e-6, -5.5555377228640651648e-7, 9.2716223776673395558e-8, -1.5356809758754943319e-8, 2.5024036220006681185e-9},
	{0.096698778169713920817, -0.016343218143802486143, 0.0027252738428496351560, -0.00044859569827753186176, 0.000072924288875328823896, -0.000011712414944726687898, 1.8593010780405142222e-6, -2.9183649516132066367e-7, 4.5307583381454433667e-8, -6.9870215731033965284e-9, 1.0621329826399115062e-9},
	{0.089156631787274389873, -0.013921269754582701168, 0.0021486958211325119735, -0.00032794724833611388451, 0.000049512759515180873381, -7.3970005662384831659e-6, 1.0938353692789486846e-6, -1.6015056588486357175e-7, 2.3222354247509356268e-8, -3.3473007881683582658e-9, 4.7639775223777965962e-10},
	{0.082695056775053059527, -0.011995900632296270590, 0.0017227275070532351454, -0.00024499330645785796977, 0.000034511344231004731932, -4.8166931681767179193e-6, 6.6622180276133115707e-7, -9.1341394258033079209e-8, 1.2416266179934240680e-8, -1.6788070546434652675e-9, 2.2444422263098585310e-10},
	{0.077099180351259901664, -0.010441052002243999914, 0.0014015533349909033341, -0.00018652688237325518269, 0.000024616718892231774086, -3.2222681658903160443e-6, 4.1842490682315884836e-7, -5.3910591899521597324e-8, 6.8929913732927680263e-9, -8.7713281109333977956e-10, 1.1049492182900430523e-10},
	{0.072207170814669760508, -0.0091680194681312860891, 0.0011550199366522938567, -0.00014440997271731719016, 0.000017921324046455220062, -2.2078845448820063733e-6, 2.7007294651601837741e-7, -3.2805416478736869412e-8, 3.9575944572589834690e-9, -4.7538616044264709052e-10, 5.6588520072658465082e-11},
	{0.067894919882720562683, -0.0081129890306232896600, 0.00096276038007842327691, -0.00011347726331752071046, 0.000013286478854391943734, -1.5455251085041304546e-6, 1.7863223924109453808e-7, -2.0516859466002799207e-8, 2.3419585264981852899e-9, -2.6629040140182882121e-10, 3.0031982300150834209e-11},
	{0.064065715551280144720, -0.0072291449481100413067, 0.00081069725531728344617, -0.000090362642722535018599, 0.000010012065747525254785, -1.1028269731908431214e-6, 1.2077657892550903148e-7, -1.3151954754118372066e-8, 1.4242004997366462586e-9, -1.5367937762274419021e-10, 1.6460630905794074864e-11},
	{0.060643115141143659079, -0.0064815369843548809402, 0.00068889803586101047313, -0.000072820101760352951995, 7.6560472888582295880e-6, -8.0066573564265896959e-7, 8.3296412269545487730e-8, -8.6211104858903898051e-9, 8.8776063017616077706e-10, -9.1123093389851890550e-11, 9.2904904722895950437e-12},
	{0.057565923364815466520, -0.0058436614816109767626, 0.00059022391910844313763, -0.000059318846869102404184, 5.9325810673388502709e-6, -5.9047258517263382652e-7, 5.8491121147769023954e-8, -5.7668955350806831048e-9, 5.6595822675879868335e-10, -5.5379161701456403419e-11, 5.3856843684985932147e-12},
	{0.054784586952954527788, -0.0052951345599447542424, 0.00050945771352079683489, -0.000048795330904390152241, 4.6527858753938220643e-6, -4.4171027272839228894e-7, 4.1751860281165719745e-8, -3.9296267741942340534e-9, 3.6828801599522588098e-10, -3.4423048401137686645e-11, 3.1993942604266358431e-12},
}

// erfcMid[i] is the center of erfcTab[i]'s interval.
var erfcMid = func() (m [erfcTabN]float64) {
	for i := range m {
		m[i] = float64(i)*0.5 + 0.25
	}
	return
}()

const erfcTabN = 21 // y up to 10.5; erfc(10.5) < 1e-49

// erfVecTab is erfcTab by coefficient, for the vector erf: c[k][i] =
// erfcTab[i][k], padded to three vectors of 8 (permute tables).
type erfVecTab struct{ c [11][24]float64 }

var erfcVec = func() (v erfVecTab) {
	for i := range erfcTab {
		for k, c := range erfcTab[i] {
			v.c[k][i] = c
		}
	}
	return
}()

// erfcPoly is h(y) = erfc(y)·e^(y²) for y >= 0.
func erfcPoly(y float64) float64 {
	a := min(y, erfcTabN*0.5) // NaN stays NaN
	// uint keeps NaN (whose int64 conversion is negative on amd64) in range.
	i := min(uint(int64(a*2)), erfcTabN-1)
	// The center from a table: converting i to float64 (CVTSQ2SD) would
	// merge into a register holding an earlier element's result and chain
	// the elements of a loop.
	t := a - erfcMid[i]
	c := &erfcTab[i]
	// Estrin's scheme: a short dependency chain, so that the elements of
	// a loop overlap.
	t2 := t * t
	t4 := t2 * t2
	q0 := (c[0] + c[1]*t) + (c[2]+c[3]*t)*t2
	q1 := (c[4] + c[5]*t) + (c[6]+c[7]*t)*t2
	q2 := (c[8] + c[9]*t) + c[10]*t2
	p := (q0 + q1*t4) + q2*(t4*t4)
	return p
}

// erff is erf for float32 results (at most 1 ulp from the correctly
// rounded value, checked over the float32 range).
func erff(x float64) float64 {
	a := math.Abs(x)
	return erfFrom(x, expf(-a*a))
}

// erfFrom is erff(x) given e = expf(-x²).
func erfFrom(x, e float64) float64 {
	a := math.Abs(x)
	if a < 0x1p-12 {
		// erf x = 2/√π (x - x³/3 + ...): the x⁵ term is below 2^-48 x.
		return x * (2 / math.SqrtPi) * (1 - x*x*(1.0/3))
	}
	return math.Copysign(1-e*erfcPoly(a), x)
}

// geluErff is x·Φ(x) = x/2·erfc(-x/√2) for float32 results, without the
// cancellation of 1 + erf(x/√2) for negative x.
func geluErff(x float64) float64 {
	y := math.Abs(x) * (1 / math.Sqrt2)
	return geluErfFrom(x, expf(-y*y))
}

// geluErfFrom is geluErff(x) given e = expf(-y²), y = |x|/√2.
func geluErfFrom(x, e float64) float64 {
	if math.IsInf(x, 0) {
		return geluErf(x) // +Inf, and NaN for -Inf as in the float64 form
	}
	he := 0.5 * x * (e * erfcPoly(math.Abs(x)*(1/math.Sqrt2)))
	// x >= 0: x/2·(2 - erfc(|x|/√2)); x < 0: x/2·erfc(|x|/√2). The select
	// is on bits: the sign of x is random in activations, a branch on it
	// mispredicts.
	return selectNeg(x, he, x-he)
}

// selectNeg returns neg when x's sign bit is set, else pos, without a
// branch.
func selectNeg(x, neg, pos float64) float64 {
	m := uint64(int64(math.Float64bits(x)) >> 63)
	return math.Float64frombits(math.Float64bits(neg)&m | math.Float64bits(pos)&^m)
}

func geluErfSlice(d, s []float32) {
	d = d[:len(s)]
	i := geluErfVec(d, s)
	d, s = d[i:], s[i:]
	var buf [vecChunk]float64
	for lo := 0; lo < len(s); lo += vecChunk {
		ss := s[lo:min(lo+vecChunk, len(s))]
		dd, b := d[lo:lo+len(ss)], buf[:len(ss)]
		for i, v := range ss {
			y := math.Abs(float64(v)) * (1 / math.Sqrt2)
			b[i] = -y * y
		}
		expN(b, b)
		for i, v := range ss {
			dd[i] = float32(geluErfFrom(widen(v), b[i]))
		}
	}
}

func erfSlice(d, s []float32) {
	d = d[:len(s)]
	i := erfVec(d, s)
	d, s = d[i:], s[i:]
	var buf [vecChunk]float64
	for lo := 0; lo < len(s); lo += vecChunk {
		ss := s[lo:min(lo+vecChunk, len(s))]
		dd, b := d[lo:lo+len(ss)], buf[:len(ss)]
		for i, v := range ss {
			x := float64(v)
			b[i] = -x * x
		}
		expN(b, b)
		for i, v := range ss {
			dd[i] = float32(erfFrom(widen(v), b[i]))
		}
	}
}
